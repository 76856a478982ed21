/*
 * Reverse-mode autodiff: every op gradient against f64 central differences (gradcheck.h), and the
 * contract of wf_gradients (unconnected xs, grad_ys, several ys, summed paths, errors leave the graph
 * unchanged, integer paths). Usage: test_grad [--device SPEC]; a SPEC no device matches is skipped.
 */
#include <stdarg.h>
#include <stdlib.h>

#include "gradcheck.h"

static const char *g_device;
static wf_context *g_ctx;

/* ---- tensors -------------------------------------------------------------------------------------- */

static uint64_t g_seed = 12345;

static double rnd01(void)
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_seed >> 11) / 9007199254740992.0;
}

/* f64 values in [lo, hi]; when lo < 0 < hi they keep |v| >= 0.15 (away from the kinks at 0). */
static wf_tensor *F(double lo, double hi, int rank, ...)
{
    int64_t dims[WF_MAX_RANK];
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) dims[i] = va_arg(ap, int);
    va_end(ap);
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F64, rank, dims, NULL, &t));
    double *p = wf_tensor_data(t);
    for (int64_t i = 0; i < wf_tensor_size(t); i++) {
        double v;
        do v = lo + (hi - lo) * rnd01();
        while (lo < 0 && hi > 0 && fabs(v) < 0.15);
        p[i] = v;
    }
    return t;
}

static wf_tensor *typed(wf_dtype dt, int rank, const int64_t *dims, const void *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(dt, rank, dims, v, &t));
    return t;
}

static wf_tensor *I(int n, ...) /* 1-D i64 */
{
    int64_t v[16], d = n;
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) v[i] = va_arg(ap, int);
    va_end(ap);
    return typed(WF_I64, 1, &d, v);
}

/* ---- the generic case ------------------------------------------------------------------------------ */

/* One node of `op`: layout 'p' takes the next placeholder, 'c' the next constant, '-' an absent input. */
typedef struct spec {
    const char *op, *layout;
    wf_attr attrs[4];
    int n_attrs;
    wf_tensor *consts[4];
    int out;
} spec;

static wf_status *build_spec(wf_graph *g, const wf_output *in, int n_in, void *arg, wf_output *out)
{
    spec *s = arg;
    wf_output ins[8];
    int pi = 0, ci = 0, n = 0;
    (void)n_in;
    for (const char *l = s->layout; *l; l++) {
        if (*l == 'p') {
            ins[n++] = in[pi++];
        } else if (*l == 'c') {
            wf_status *st = wf_const(g, NULL, s->consts[ci++], &ins[n]);
            if (st) return st;
            n++;
        } else {
            ins[n++] = (wf_output){0};
        }
    }
    wf_node *node;
    wf_status *st = wf_op(g, s->op, "node", ins, n, s->attrs, s->n_attrs, &node);
    if (st) return st;
    *out = wf_out(node, s->out);
    return NULL;
}

static int g_cases, g_bad_cases;
static double g_h, g_rtol, g_atol; /* 0: gradcheck's defaults; set for an output computed in f32 */

/* Runs gradcheck and frees the inputs and the spec's constants. */
static void run_spec(const char *name, spec s, unsigned skip, int n_in, ...)
{
    wf_tensor *in[GC_MAX_IN];
    va_list ap;
    va_start(ap, n_in);
    for (int i = 0; i < n_in; i++) in[i] = va_arg(ap, wf_tensor *);
    va_end(ap);
    gc_opts o = {.device = g_device, .skip_mask = skip, .ctx = g_ctx, .h = g_h, .rtol = g_rtol, .atol = g_atol};
    g_cases++;
    if (gradcheck(name, build_spec, &s, n_in, in, &o)) {
        g_bad_cases++;
        fprintf(stderr, "  case %s failed\n", name);
    }
    for (int i = 0; i < n_in; i++) wf_tensor_free(in[i]);
    for (int i = 0; i < 4; i++) wf_tensor_free(s.consts[i]);
}

/* y + batch_mean + 2 batch_variance, the statistics broadcast over [1, C, 1, 1]: every output's gradient
 * reaches FusedBatchNormGrad at once. */
static wf_status *build_bn_all(wf_graph *g, const wf_output *in, int n_in, void *arg, wf_output *out)
{
    (void)n_in, (void)arg;
    wf_node *bn;
    wf_status *st = wf_op(g, "FusedBatchNorm", "bn", in, 3, NULL, 0, &bn);
    int64_t bshape[4] = {1, -1, 1, 1};
    wf_output m, v, two, t;
    if (!st) st = wf_reshape(g, NULL, wf_out(bn, 1), 4, bshape, &m);
    if (!st) st = wf_reshape(g, NULL, wf_out(bn, 2), 4, bshape, &v);
    if (!st) st = wf_const_scalar(g, NULL, WF_F64, 2.0, &two);
    if (!st) st = wf_mul(g, NULL, v, two, &v);
    if (!st) st = wf_add(g, NULL, wf_out(bn, 0), m, &t);
    if (!st) st = wf_add(g, NULL, t, v, out);
    return st;
}

#define S(...) ((spec){__VA_ARGS__})
#define A1(a) .attrs = {a}, .n_attrs = 1
#define A2(a, b) .attrs = {a, b}, .n_attrs = 2
#define A3(a, b, c) .attrs = {a, b, c}, .n_attrs = 3
#define AI wf_attr_int
#define AF wf_attr_float
#define AS wf_attr_string
static wf_attr AIS(const char *nm, int n, ...)
{
    static int64_t store[16][8];
    static int k;
    int64_t *v = store[k++ % 16];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) v[i] = va_arg(ap, int);
    va_end(ap);
    return wf_attr_ints(nm, v, n);
}

static void unary(const char *op, double lo, double hi)
{
    run_spec(op, S(.op = op, .layout = "p"), 0, 1, F(lo, hi, 2, 2, 3));
}

static void test_elementwise(void)
{
    run_spec("Add bcast", S(.op = "Add", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(-2, 2, 1, 3));
    run_spec("Add bcast both", S(.op = "Add", .layout = "pp"), 0, 2, F(-2, 2, 3, 2, 1, 3), F(-2, 2, 2, 4, 1));
    run_spec("Add rank0", S(.op = "Add", .layout = "pp"), 0, 2, F(-2, 2, 0), F(-2, 2, 2, 2, 3));
    run_spec("Sub", S(.op = "Sub", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(-2, 2, 2, 2, 1));
    run_spec("Mul", S(.op = "Mul", .layout = "pp"), 0, 2, F(-2, 2, 2, 3, 1), F(-2, 2, 2, 1, 4));
    run_spec("Div", S(.op = "Div", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(0.5, 2, 1, 3));
    run_spec("Pow", S(.op = "Pow", .layout = "pp"), 0, 2, F(0.5, 2, 2, 2, 3), F(-1, 2, 2, 2, 3));
    run_spec("Pow scalar", S(.op = "Pow", .layout = "pp"), 0, 2, F(0.5, 2, 2, 2, 3), F(1.5, 2.5, 0));
    run_spec("Maximum", S(.op = "Maximum", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(-2, 2, 1, 3));
    run_spec("Minimum", S(.op = "Minimum", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(-2, 2, 2, 2, 1));
    {
        int64_t d[2] = {2, 3};
        unsigned char cond[6] = {1, 0, 0, 1, 1, 0};
        run_spec("Where", S(.op = "Where", .layout = "ppp"), 0, 3, typed(WF_BOOL, 2, d, cond), F(-2, 2, 2, 2, 3),
                 F(-2, 2, 1, 3));
    }
    static const struct { const char *op; double lo, hi; } un[] = {
        {"Neg", -2, 2}, {"Abs", -2, 2}, {"Square", -2, 2}, {"Relu", -2, 2}, {"Exp", -2, 2}, {"Log", 0.3, 3},
        {"Sqrt", 0.3, 3}, {"Rsqrt", 0.3, 3}, {"Reciprocal", 0.3, 3}, {"Tanh", -2, 2}, {"Sigmoid", -3, 3},
        {"Softplus", -3, 3}, {"Erf", -2, 2}, {"Sin", -3, 3}, {"Cos", -3, 3}, {"Tan", -1, 1}, {"Asin", -0.8, 0.8},
        {"Acos", -0.8, 0.8}, {"Atan", -2, 2}, {"Sinh", -2, 2}, {"Cosh", -2, 2}, {"Asinh", -2, 2},
        {"Acosh", 1.2, 3}, {"Atanh", -0.8, 0.8}, {"Softsign", -2, 2}, {"Selu", -2, 2}, {"Elu", -2, 2},
        {"Celu", -2, 2}, {"Swish", -2, 2}, {"HardSigmoid", -2, 2}, {"LeakyRelu", -2, 2}, {"Gelu", -3, 3},
        {"Identity", -2, 2},
    };
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) unary(un[i].op, un[i].lo, un[i].hi);
    run_spec("LeakyRelu alpha", S(.op = "LeakyRelu", .layout = "p", A1(AF("alpha", 0.3))), 0, 1, F(-2, 2, 1, 5));
    run_spec("Elu alpha", S(.op = "Elu", .layout = "p", A1(AF("alpha", 0.7))), 0, 1, F(-2, 2, 1, 5));
    run_spec("Celu alpha", S(.op = "Celu", .layout = "p", A1(AF("alpha", 0.5))), 0, 1, F(-2, 2, 1, 5));
    run_spec("Gelu tanh", S(.op = "Gelu", .layout = "p", A1(AS("approximate", "tanh"))), 0, 1, F(-3, 3, 2, 2, 3));
    run_spec("ThresholdedRelu", S(.op = "ThresholdedRelu", .layout = "p", A1(AF("alpha", 0.05))), 0, 1,
             F(-2, 2, 1, 6));
    run_spec("Relu rank0", S(.op = "Relu", .layout = "p"), 0, 1, F(0.5, 2, 0));
    {
        int64_t d[2] = {2, 3};
        double x[6] = {-1.5, -0.9, -0.2, 0.1, 0.4, 1.3};
        run_spec("Clip", S(.op = "Clip", .layout = "ppp"), 0, 3, typed(WF_F64, 2, d, x), F(-0.5, -0.5, 0),
                 F(0.7, 0.7, 0));
        run_spec("Clip max only", S(.op = "Clip", .layout = "p-p"), 0, 2, typed(WF_F64, 2, d, x), F(0.7, 0.7, 0));
    }
    run_spec("PRelu", S(.op = "PRelu", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(0.1, 0.5, 1, 3));
    run_spec("Sum variadic", S(.op = "Sum", .layout = "ppp"), 0, 3, F(-2, 2, 2, 2, 3), F(-2, 2, 1, 3), F(-2, 2, 0));
    run_spec("Mean variadic", S(.op = "Mean", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(-2, 2, 2, 2, 1));
    run_spec("Max variadic", S(.op = "Max", .layout = "ppp"), 0, 3, F(-2, 2, 2, 2, 3), F(-2, 2, 1, 3), F(-2, 2, 2, 2, 3));
    run_spec("Min variadic", S(.op = "Min", .layout = "pp"), 0, 2, F(-2, 2, 2, 2, 3), F(-2, 2, 1, 3));
    run_spec("Cast f64", S(.op = "Cast", .layout = "p", A1(wf_attr_dtype("to", WF_F64))), 0, 1, F(-2, 2, 1, 4));
    run_spec("Dropout", S(.op = "Dropout", .layout = "p"), 0, 1, F(-2, 2, 2, 2, 3));
}

static void test_matrix(void)
{
    run_spec("MatMul", S(.op = "MatMul", .layout = "pp"), 0, 2, F(-1, 1, 2, 2, 3), F(-1, 1, 2, 3, 4));
    run_spec("MatMul batch bcast", S(.op = "MatMul", .layout = "pp"), 0, 2, F(-1, 1, 4, 2, 1, 2, 3),
             F(-1, 1, 3, 3, 3, 2));
    run_spec("MatMul ta", S(.op = "MatMul", .layout = "pp", A1(AI("transpose_a", 1))), 0, 2, F(-1, 1, 2, 3, 2),
             F(-1, 1, 2, 3, 4));
    run_spec("MatMul tb", S(.op = "MatMul", .layout = "pp", A1(AI("transpose_b", 1))), 0, 2, F(-1, 1, 2, 2, 3),
             F(-1, 1, 2, 4, 3));
    run_spec("MatMul ta tb", S(.op = "MatMul", .layout = "pp", A2(AI("transpose_a", 1), AI("transpose_b", 1))), 0,
             2, F(-1, 1, 3, 2, 3, 2), F(-1, 1, 2, 4, 3));
    run_spec("MatMul 1-D A", S(.op = "MatMul", .layout = "pp"), 0, 2, F(-1, 1, 1, 3), F(-1, 1, 2, 3, 4));
    run_spec("MatMul 1-D B", S(.op = "MatMul", .layout = "pp"), 0, 2, F(-1, 1, 3, 2, 2, 3), F(-1, 1, 1, 3));
    run_spec("MatMul dot", S(.op = "MatMul", .layout = "pp"), 0, 2, F(-1, 1, 1, 3), F(-1, 1, 1, 3));
    run_spec("Gemm", S(.op = "Gemm", .layout = "ppp", A2(AF("alpha", 0.5), AF("beta", 2))), 0, 3, F(-1, 1, 2, 2, 3),
             F(-1, 1, 2, 3, 4), F(-1, 1, 1, 4));
    run_spec("Gemm trans", S(.op = "Gemm", .layout = "ppp", A2(AI("transA", 1), AI("transB", 1))), 0, 3,
             F(-1, 1, 2, 3, 2), F(-1, 1, 2, 4, 3), F(-1, 1, 2, 2, 1));
    run_spec("Gemm no C", S(.op = "Gemm", .layout = "pp", A1(AI("transB", 1))), 0, 2, F(-1, 1, 2, 2, 3),
             F(-1, 1, 2, 4, 3));
    run_spec("BiasAdd", S(.op = "BiasAdd", .layout = "pp"), 0, 2, F(-1, 1, 2, 2, 3), F(-1, 1, 1, 3));
    run_spec("BiasAdd NCHW", S(.op = "BiasAdd", .layout = "pp", A1(AS("data_format", "NCHW"))), 0, 2,
             F(-1, 1, 4, 2, 3, 2, 2), F(-1, 1, 1, 3));
}

static void test_reduce(void)
{
    run_spec("ReduceSum axis", S(.op = "ReduceSum", .layout = "p", A2(AIS("axes", 1, 1), AI("keepdims", 0))), 0, 1,
             F(-2, 2, 3, 2, 3, 4));
    run_spec("ReduceSum axes input", S(.op = "ReduceSum", .layout = "pc", .consts = {I(1, -1)}), 0, 1,
             F(-2, 2, 3, 2, 3, 4));
    run_spec("ReduceSum all", S(.op = "ReduceSum", .layout = "p", A1(AI("keepdims", 0))), 0, 1, F(-2, 2, 2, 2, 3));
    run_spec("ReduceSum noop", S(.op = "ReduceSum", .layout = "p", A1(AI("noop_with_empty_axes", 1))), 0, 1,
             F(-2, 2, 2, 2, 3));
    run_spec("ReduceMean", S(.op = "ReduceMean", .layout = "p", A1(AIS("axes", 2, 0, 2))), 0, 1, F(-2, 2, 3, 2, 3, 4));
    run_spec("ReduceMean all", S(.op = "ReduceMean", .layout = "p", A1(AI("keepdims", 0))), 0, 1, F(-2, 2, 1, 5));
    run_spec("ReduceMax", S(.op = "ReduceMax", .layout = "p", A2(AIS("axes", 1, 1), AI("keepdims", 0))), 0, 1,
             F(-2, 2, 3, 2, 3, 4));
    run_spec("ReduceMin", S(.op = "ReduceMin", .layout = "p"), 0, 1, F(-2, 2, 2, 3, 4));
    run_spec("ReduceProd", S(.op = "ReduceProd", .layout = "p", A1(AIS("axes", 1, 1))), 0, 1, F(-2, 2, 2, 3, 4));
    run_spec("ReduceL2", S(.op = "ReduceL2", .layout = "p", A2(AIS("axes", 1, -1), AI("keepdims", 0))), 0, 1,
             F(-2, 2, 2, 3, 4));
    run_spec("Softmax", S(.op = "Softmax", .layout = "p", A1(AI("axis", 1))), 0, 1, F(-2, 2, 3, 2, 3, 4));
    run_spec("Softmax last", S(.op = "Softmax", .layout = "p"), 0, 1, F(-2, 2, 2, 3, 4));
    run_spec("LogSoftmax", S(.op = "LogSoftmax", .layout = "p", A1(AI("axis", 0))), 0, 1, F(-2, 2, 2, 3, 4));
    run_spec("LayerNormalization", S(.op = "LayerNormalization", .layout = "ppp", A1(AI("stash_type", 11))), 0, 3,
             F(-2, 2, 3, 2, 3, 4), F(0.5, 1.5, 1, 4), F(-1, 1, 1, 4));
    run_spec("LayerNormalization axis 1", S(.op = "LayerNormalization", .layout = "pp",
                                            A2(AI("axis", 1), AI("stash_type", 11))),
             0, 2, F(-2, 2, 3, 2, 3, 4), F(0.5, 1.5, 2, 3, 4));
    /* Mean and InvStdDev are f32 whatever X is: steps and tolerances for f32 finite differences */
    g_h = 1e-3, g_rtol = 1e-2, g_atol = 1e-3;
    run_spec("LayerNormalization Mean", S(.op = "LayerNormalization", .layout = "pp", A1(AI("stash_type", 11)),
                                          .out = 1),
             2, 2, F(-2, 2, 2, 3, 4), F(0.5, 1.5, 1, 4));
    run_spec("LayerNormalization InvStdDev", S(.op = "LayerNormalization", .layout = "pp",
                                               A1(AI("stash_type", 11)), .out = 2),
             2, 2, F(-2, 2, 2, 3, 4), F(0.5, 1.5, 1, 4));
    g_h = g_rtol = g_atol = 0;
    run_spec("BatchNormalization", S(.op = "BatchNormalization", .layout = "ppppp"), 0, 5, F(-2, 2, 4, 2, 3, 2, 2),
             F(0.5, 1.5, 1, 3), F(-1, 1, 1, 3), F(-1, 1, 1, 3), F(0.5, 2, 1, 3));
    /* training BatchNorm: through y, through each batch statistic alone (y's gradient absent), and all three */
    for (int o = 0; o < 3; o++) {
        char nm[48];
        snprintf(nm, sizeof nm, "FusedBatchNorm out %d", o);
        run_spec(nm, S(.op = "FusedBatchNorm", .layout = "ppp", A1(AF("epsilon", 1e-3)), .out = o), 0, 3,
                 F(-2, 2, 4, 3, 2, 2, 3), F(0.5, 1.5, 1, 2), F(-1, 1, 1, 2));
    }
    run_spec("FusedBatchNorm rank 2", S(.op = "FusedBatchNorm", .layout = "ppp"), 0, 3, F(-2, 2, 2, 5, 3),
             F(0.5, 1.5, 1, 3), F(-1, 1, 1, 3));
    run_spec("FusedBatchNorm rank 3", S(.op = "FusedBatchNorm", .layout = "ppp"), 0, 3, F(-2, 2, 3, 2, 4, 5),
             F(0.5, 1.5, 1, 4), F(-1, 1, 1, 4));
    wf_tensor *bn_in[3] = {F(-2, 2, 4, 2, 3, 2, 2), F(0.5, 1.5, 1, 3), F(-1, 1, 1, 3)};
    gc_opts o = {.device = g_device, .ctx = g_ctx};
    g_cases++;
    if (gradcheck("FusedBatchNorm y + mean + variance", build_bn_all, NULL, 3, bn_in, &o)) {
        g_bad_cases++;
        fprintf(stderr, "  case FusedBatchNorm y + mean + variance failed\n");
    }
    for (int i = 0; i < 3; i++) wf_tensor_free(bn_in[i]);
}

static void test_shape(void)
{
    run_spec("Reshape", S(.op = "Reshape", .layout = "pc", .consts = {I(2, 4, 6)}), 0, 1, F(-2, 2, 3, 2, 3, 4));
    run_spec("Flatten", S(.op = "Flatten", .layout = "p", A1(AI("axis", 2))), 0, 1, F(-2, 2, 3, 2, 3, 4));
    run_spec("Squeeze", S(.op = "Squeeze", .layout = "pc", .consts = {I(1, 1)}), 0, 1, F(-2, 2, 3, 2, 1, 3));
    run_spec("Unsqueeze", S(.op = "Unsqueeze", .layout = "pc", .consts = {I(2, 0, 3)}), 0, 1, F(-2, 2, 2, 2, 3));
    run_spec("Transpose", S(.op = "Transpose", .layout = "p", A1(AIS("perm", 3, 2, 0, 1))), 0, 1, F(-2, 2, 3, 2, 3, 4));
    run_spec("Transpose default", S(.op = "Transpose", .layout = "p"), 0, 1, F(-2, 2, 3, 2, 3, 4));
    run_spec("Concat", S(.op = "Concat", .layout = "pp", A1(AI("axis", 1))), 0, 2, F(-2, 2, 2, 2, 3), F(-2, 2, 2, 2, 2));
    run_spec("Concat 3", S(.op = "Concat", .layout = "ppp", A1(AI("axis", -1))), 0, 3, F(-2, 2, 2, 2, 1),
             F(-2, 2, 2, 2, 2), F(-2, 2, 2, 2, 3));
    run_spec("Split out 1", S(.op = "Split", .layout = "pc", A2(AI("axis", 1), AI("num_outputs", 2)),
                              .consts = {I(2, 1, 3)}, .out = 1),
             0, 1, F(-2, 2, 2, 2, 4));
    run_spec("Split out 0", S(.op = "Split", .layout = "p", A2(AI("axis", 0), AI("num_outputs", 2))), 0, 1,
             F(-2, 2, 2, 4, 3));
    run_spec("Slice", S(.op = "Slice", .layout = "pccc", .consts = {I(2, 1, 0), I(2, 3, -1), I(2, 0, 1)}), 0, 1,
             F(-2, 2, 2, 4, 5));
    run_spec("Slice step", S(.op = "Slice", .layout = "pcccc", .consts = {I(1, 0), I(1, 5), I(1, 1), I(1, 2)}), 0, 1,
             F(-2, 2, 2, 4, 5));
    run_spec("Slice reverse", S(.op = "Slice", .layout = "pcccc", .consts = {I(1, -1), I(1, -100), I(1, 0), I(1, -1)}),
             0, 1, F(-2, 2, 2, 4, 5));
    {
        int64_t d2[2] = {2, 2}, d1[1] = {2};
        int64_t idx[4] = {0, -1, 2, 0}, idx1[2] = {3, 1}, idx0 = 1;
        run_spec("Gather", S(.op = "Gather", .layout = "pp"), 0, 2, F(-2, 2, 2, 5, 3), typed(WF_I64, 2, d2, idx));
        run_spec("Gather axis 1", S(.op = "Gather", .layout = "pp", A1(AI("axis", 1))), 0, 2, F(-2, 2, 3, 2, 4, 3),
                 typed(WF_I64, 1, d1, idx1));
        run_spec("Gather scalar index", S(.op = "Gather", .layout = "pp", A1(AI("axis", 1))), 0, 2,
                 F(-2, 2, 3, 2, 4, 3), typed(WF_I64, 0, NULL, &idx0));
    }
    {
        wf_tensor *v = NULL;
        CHECK_OK(wf_tensor_new(WF_F64, 0, NULL, NULL, &v));
        if (v) *(double *)wf_tensor_data(v) = 0.5;
        run_spec("Pad", S(.op = "Pad", .layout = "pcc", .consts = {I(4, 1, 0, 2, 1), v}), 0, 1, F(-2, 2, 2, 2, 3));
    }
    run_spec("Expand", S(.op = "Expand", .layout = "pc", .consts = {I(3, 2, 3, 4)}), 0, 1, F(-2, 2, 2, 3, 1));
    run_spec("Tile", S(.op = "Tile", .layout = "pc", .consts = {I(2, 2, 3)}), 0, 1, F(-2, 2, 2, 2, 3));
}

/* ---- the API ----------------------------------------------------------------------------------------- */

static wf_tensor *run1(wf_graph *g, const wf_feed *feeds, int n_feeds, wf_output fetch)
{
    wf_session *s = NULL;
    wf_tensor *out = NULL;
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = g_device;
    so.strict_placement = g_device != NULL;
    CHECK_OK(wf_session_new(g_ctx, g, &so, &s));
    if (s) CHECK_OK(wf_session_run(s, feeds, n_feeds, &fetch, 1, &out, NULL));
    wf_session_free(s);
    return out;
}

static const double XV[3] = {0.3, -1.2, 2.0};

static wf_graph *graph_x(wf_output *x, wf_tensor **xt)
{
    wf_graph *g = NULL;
    int64_t d = 3;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_placeholder(g, "x", WF_F64, 1, &d, x));
    *xt = typed(WF_F64, 1, &d, XV);
    return g;
}

/* y = x*x + exp(x): x reaches y by two paths, whose gradients are summed. Then a second call on the same
 * graph works too (its nodes go under another root). */
static void test_two_paths(void)
{
    wf_tensor *xt;
    wf_output x, sq, ex, y, dx, dx2;
    wf_graph *g = graph_x(&x, &xt);
    CHECK_OK(wf_mul(g, "sq", x, x, &sq));
    CHECK_OK(wf_unary(g, "Exp", "ex", x, &ex));
    CHECK_OK(wf_add(g, "y", sq, ex, &y));
    CHECK_OK(wf_gradients(g, &y, 1, NULL, &x, 1, &dx));
    CHECK_OK(wf_gradients(g, &y, 1, NULL, &x, 1, &dx2));
    CHECK(dx.node && dx2.node && dx.node != dx2.node);
    wf_node *n;
    CHECK_OK(wf_graph_find(g, "gradients/sq/Mul", &n));
    CHECK_OK(wf_graph_find(g, "gradients_1/sq/Mul", &n));
    wf_feed f = {x, xt};
    for (int k = 0; k < 2; k++) {
        wf_tensor *r = run1(g, &f, 1, k ? dx2 : dx);
        for (int i = 0; r && i < 3; i++) CHECK_NEAR(((double *)wf_tensor_data(r))[i], 2 * XV[i] + exp(XV[i]), 1e-12);
        wf_tensor_free(r);
    }
    wf_tensor_free(xt);
    wf_graph_free(g);
}

/* grad_ys weights the ys; two ys add up; an x that is also a y gets its grad_ys. */
static void test_grad_ys_and_two_ys(void)
{
    wf_tensor *xt, *gt;
    wf_output x, gy, y[2], dx[1], dxx;
    wf_graph *g = graph_x(&x, &xt);
    int64_t d = 3;
    double gv[3] = {1.5, -2, 0.25};
    gt = typed(WF_F64, 1, &d, gv);
    CHECK_OK(wf_placeholder(g, "gy", WF_F64, 1, &d, &gy));
    CHECK_OK(wf_mul(g, "y0", x, x, &y[0]));
    CHECK_OK(wf_unary(g, "Sin", "y1", x, &y[1]));
    wf_output gys[2] = {gy, {0}}; /* the second one NULL: ones */
    CHECK_OK(wf_gradients(g, y, 2, gys, &x, 1, dx));
    wf_output self[1] = {x};
    CHECK_OK(wf_gradients(g, self, 1, &gy, self, 1, &dxx));
    wf_feed f[2] = {{x, xt}, {gy, gt}};
    wf_tensor *r = run1(g, f, 2, dx[0]);
    for (int i = 0; r && i < 3; i++)
        CHECK_NEAR(((double *)wf_tensor_data(r))[i], gv[i] * 2 * XV[i] + cos(XV[i]), 1e-12);
    wf_tensor_free(r);
    r = run1(g, f, 2, dxx);
    for (int i = 0; r && i < 3; i++) CHECK_NEAR(((double *)wf_tensor_data(r))[i], gv[i], 0);
    wf_tensor_free(r);
    /* a grad_ys of the wrong dtype or shape */
    wf_output bad;
    int64_t d2 = 2;
    CHECK_OK(wf_placeholder(g, "bad", WF_F64, 1, &d2, &bad));
    int before = wf_graph_num_nodes(g);
    CHECK_ERR(wf_gradients(g, y, 1, &bad, &x, 1, dx), WF_INVALID_ARGUMENT, "grad_ys[0]");
    CHECK_INT(wf_graph_num_nodes(g), before);
    wf_tensor_free(xt);
    wf_tensor_free(gt);
    wf_graph_free(g);
}

/* An x the ys do not depend on gets none; so does one reached only through integers. */
static void test_unconnected_and_integer(void)
{
    wf_tensor *xt;
    wf_output x, z, ci, cf, y, two, y2, in[3], dx[3];
    wf_graph *g = graph_x(&x, &xt);
    int64_t d = 3;
    CHECK_OK(wf_placeholder(g, "z", WF_F64, 1, &d, &z));
    wf_attr to_i = wf_attr_dtype("to", WF_I32), to_f = wf_attr_dtype("to", WF_F64);
    wf_node *n;
    CHECK_OK(wf_op(g, "Cast", "ci", &x, 1, &to_i, 1, &n));
    ci = wf_out(n, 0);
    CHECK_OK(wf_op(g, "Cast", "cf", &ci, 1, &to_f, 1, &n));
    cf = wf_out(n, 0);
    CHECK_OK(wf_const_scalar(g, "two", WF_F64, 2, &two));
    CHECK_OK(wf_mul(g, "y", cf, two, &y));
    in[0] = x;
    in[1] = z;
    in[2] = ci;
    CHECK_OK(wf_gradients(g, &y, 1, NULL, in, 3, dx));
    CHECK(dx[0].node == NULL);
    CHECK(dx[1].node == NULL);
    CHECK(dx[2].node == NULL);
    /* a piecewise-constant op passes nothing back either */
    wf_output fl, y3;
    CHECK_OK(wf_unary(g, "Floor", "fl", x, &fl));
    CHECK_OK(wf_mul(g, "y3", fl, x, &y3));
    CHECK_OK(wf_gradients(g, &fl, 1, NULL, &x, 1, dx));
    CHECK(dx[0].node == NULL);
    /* the integer path next to a float one: only the float one counts */
    CHECK_OK(wf_mul(g, "y2", x, y, &y2));
    CHECK_OK(wf_gradients(g, &y2, 1, NULL, &x, 1, dx));
    CHECK(dx[0].node != NULL);
    wf_feed f = {x, xt};
    wf_tensor *r = dx[0].node ? run1(g, &f, 1, dx[0]) : NULL;
    for (int i = 0; r && i < 3; i++)
        CHECK_NEAR(((double *)wf_tensor_data(r))[i], 2 * (double)(int)XV[i], 1e-12);
    wf_tensor_free(r);
    wf_tensor_free(xt);
    wf_graph_free(g);
}

/* An op without a gradient on the path: UNIMPLEMENTED naming it, and the graph is as it was. */
static void test_no_gradient(void)
{
    wf_tensor *xt;
    wf_output x, e, cs, y, ax, dx = {(wf_node *)1, 7};
    wf_graph *g = graph_x(&x, &xt);
    CHECK_OK(wf_unary(g, "Exp", "e", x, &e));
    CHECK_OK(wf_const_scalar(g, "axis", WF_I64, 0, &ax));
    CHECK_OK(wf_binary(g, "CumSum", "cs", e, ax, &cs));
    CHECK_OK(wf_mul(g, "y", cs, e, &y));
    int before = wf_graph_num_nodes(g);
    CHECK_ERR(wf_gradients(g, &y, 1, NULL, &x, 1, &dx), WF_UNIMPLEMENTED,
              "node 'cs' (CumSum): no gradient is defined for CumSum");
    CHECK_INT(wf_graph_num_nodes(g), before);
    CHECK(dx.node == (wf_node *)1 && dx.index == 7); /* not written on failure */
    wf_node *n = NULL;
    wf_status *st = wf_graph_find(g, "gradients/y/Mul", &n);
    CHECK(st != NULL);
    wf_status_free(st);
    /* the graph still works and a later call succeeds */
    CHECK_OK(wf_gradients(g, &e, 1, NULL, &x, 1, &dx));
    CHECK_ERR(wf_gradients(g, &y, 1, NULL, NULL, 1, &dx), WF_INVALID_ARGUMENT, "wf_gradients");
    wf_tensor_free(xt);
    wf_graph_free(g);
}

/* Shapes unknown while building: the broadcast axes are found at run time. */
static void test_dynamic_broadcast(void)
{
    wf_graph *g = NULL;
    wf_output a, b, y, l, dx[2];
    int64_t d[2] = {-1, 3};
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_placeholder(g, "a", WF_F64, 2, d, &a));
    CHECK_OK(wf_placeholder(g, "b", WF_F64, 2, d, &b));
    CHECK_OK(wf_mul(g, "y", a, b, &y));
    wf_attr keep = wf_attr_int("keepdims", 0);
    wf_node *n;
    CHECK_OK(wf_op(g, "ReduceSum", "l", &y, 1, &keep, 1, &n));
    l = wf_out(n, 0);
    wf_output xs[2] = {a, b};
    CHECK_OK(wf_gradients(g, &l, 1, NULL, xs, 2, dx));
    int64_t da[2] = {2, 3}, db[2] = {1, 3};
    double av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {0.5, -1, 2};
    wf_tensor *at = typed(WF_F64, 2, da, av), *bt = typed(WF_F64, 2, db, bv);
    wf_feed f[2] = {{a, at}, {b, bt}};
    wf_tensor *r = run1(g, f, 2, dx[1]);
    if (r) {
        CHECK_INT(wf_tensor_size(r), 3);
        for (int i = 0; i < 3; i++) CHECK_NEAR(((double *)wf_tensor_data(r))[i], av[i] + av[3 + i], 1e-12);
    }
    wf_tensor_free(r);
    r = run1(g, f, 2, dx[0]);
    if (r) {
        CHECK_INT(wf_tensor_size(r), 6);
        for (int i = 0; i < 6; i++) CHECK_NEAR(((double *)wf_tensor_data(r))[i], bv[i % 3], 1e-12);
    }
    wf_tensor_free(r);
    wf_tensor_free(at);
    wf_tensor_free(bt);
    wf_graph_free(g);
}

/* A small network: the gradient of a softmax cross-entropy-like loss through Gemm, Relu, MatMul. */
static wf_status *build_mlp(wf_graph *g, const wf_output *in, int n_in, void *arg, wf_output *out)
{
    (void)n_in, (void)arg;
    wf_output h, r, z, sm;
    wf_status *s;
    wf_attr tb = wf_attr_int("transB", 0);
    wf_node *n;
    wf_output gi[3] = {in[0], in[1], in[2]};
    if ((s = wf_op(g, "Gemm", "fc1", gi, 3, &tb, 1, &n))) return s;
    h = wf_out(n, 0);
    if ((s = wf_relu(g, "relu", h, &r))) return s;
    if ((s = wf_matmul(g, "fc2", r, in[3], 0, 0, &z))) return s;
    wf_attr ax = wf_attr_int("axis", 1);
    wf_output zz = z;
    if ((s = wf_op(g, "LogSoftmax", "lsm", &zz, 1, &ax, 1, &n))) return s;
    sm = wf_out(n, 0);
    *out = sm;
    return NULL;
}

static void test_mlp(void)
{
    wf_tensor *in[4] = {F(-1, 1, 2, 3, 4), F(-1, 1, 2, 4, 5), F(-1, 1, 1, 5), F(-1, 1, 2, 5, 3)};
    gc_opts o = {.device = g_device, .ctx = g_ctx};
    g_cases++;
    if (gradcheck("mlp", build_mlp, NULL, 4, in, &o)) g_bad_cases++;
    for (int i = 0; i < 4; i++) wf_tensor_free(in[i]);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--device")) g_device = argv[2];
    CHECK_OK(wf_context_new(NULL, &g_ctx));
    if (!g_ctx) return 1;
    if (g_device && !gc_device_present(g_ctx, g_device)) {
        CHECK_SKIP("test_grad", "no device matches %s", g_device);
        check_skipped_++;
        check_summary();
        wf_context_free(g_ctx);
        return 0;
    }
    RUN_TEST(test_elementwise);
    RUN_TEST(test_matrix);
    RUN_TEST(test_reduce);
    RUN_TEST(test_shape);
    RUN_TEST(test_mlp);
    RUN_TEST(test_two_paths);
    RUN_TEST(test_grad_ys_and_two_ys);
    RUN_TEST(test_unconnected_and_integer);
    RUN_TEST(test_no_gradient);
    RUN_TEST(test_dynamic_broadcast);
    printf("gradient cases%s%s: %d passed, %d failed\n", g_device ? " on " : "", g_device ? g_device : "",
           g_cases - g_bad_cases, g_bad_cases);
    wf_context_free(g_ctx);
    return check_summary();
}
