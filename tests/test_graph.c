/* Graph building: validation at every call, names, attributes, shape inference; a failed call leaves
 * the graph exactly as it was. */
#include "check.h"

static wf_graph *g;

static void setup(void) { wf_graph_free(g); CHECK_OK(wf_graph_new(&g)); }

static void test_names(void)
{
    setup();
    wf_output x, a, b;
    int64_t d[1] = {3};
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_add(g, NULL, x, x, &a));
    CHECK_OK(wf_add(g, NULL, a, x, &b));
    CHECK(strcmp(wf_node_name(a.node), "Add") == 0);
    CHECK(strcmp(wf_node_name(b.node), "Add_1") == 0);
    CHECK_ERR(wf_add(g, "x", a, a, NULL), WF_ALREADY_EXISTS, "node 'x' (Add): a node with this name already exists");
    CHECK_ERR(wf_add(g, "bad:name", a, a, NULL), WF_INVALID_ARGUMENT, "contains ':'");
    wf_node *n;
    CHECK_OK(wf_graph_find(g, "Add_1", &n));
    CHECK(n == b.node);
    CHECK_ERR(wf_graph_find(g, "nope", &n), WF_NOT_FOUND, "no node named 'nope'");
    wf_output o;
    CHECK_OK(wf_graph_output(g, "Add:0", &o));
    CHECK(o.node == a.node && o.index == 0);
    CHECK_ERR(wf_graph_output(g, "Add:3", &o), WF_NOT_FOUND, "has 1 outputs");
    CHECK_INT(wf_graph_num_nodes(g), 3);
}

static void test_errors_leave_graph_unchanged(void)
{
    setup();
    int64_t d23[2] = {2, 3}, d4[1] = {4};
    wf_output x, y, i;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, d23, &x));
    CHECK_OK(wf_placeholder(g, "y", WF_F32, 1, d4, &y));
    CHECK_OK(wf_placeholder(g, "i", WF_I32, 2, d23, &i));
    int before = wf_graph_num_nodes(g);
    /* unknown op */
    CHECK_ERR(wf_op(g, "Frobnicate", "f", &x, 1, NULL, 0, NULL), WF_NOT_FOUND, "unknown op 'Frobnicate'");
    /* incompatible shapes name the node, the op and both shapes */
    wf_status *s = wf_add(g, "bad_add", x, y, NULL);
    CHECK_INT(wf_status_code(s), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(s), "node 'bad_add' (Add)");
    CHECK_STR_CONTAINS(wf_status_message(s), "[2,3]");
    CHECK_STR_CONTAINS(wf_status_message(s), "[4]");
    wf_status_free(s);
    /* dtype mismatch names both dtypes */
    s = wf_add(g, "mixed", x, i, NULL);
    CHECK_INT(wf_status_code(s), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(s), "f32");
    CHECK_STR_CONTAINS(wf_status_message(s), "i32");
    wf_status_free(s);
    /* wrong number of inputs */
    CHECK_ERR(wf_op(g, "Add", "one", &x, 1, NULL, 0, NULL), WF_INVALID_ARGUMENT, "node 'one' (Add): takes 2 to 2 inputs, got 1");
    /* attributes: unknown, wrong type, missing required, given twice */
    wf_attr a1 = wf_attr_int("axis", 1);
    CHECK_ERR(wf_op(g, "Relu", "r", &x, 1, &a1, 1, NULL), WF_INVALID_ARGUMENT, "unknown attribute 'axis'");
    wf_attr a2 = wf_attr_string("alpha", "big");
    CHECK_ERR(wf_op(g, "LeakyRelu", "lr", &x, 1, &a2, 1, NULL), WF_INVALID_ARGUMENT, "attribute 'alpha' must be float, got string");
    CHECK_ERR(wf_op(g, "Cast", "c", &x, 1, NULL, 0, NULL), WF_INVALID_ARGUMENT, "missing required attribute 'to'");
    wf_attr two[2] = {wf_attr_float("alpha", 0.1), wf_attr_float("alpha", 0.2)};
    CHECK_ERR(wf_op(g, "LeakyRelu", "lr2", &x, 1, two, 2, NULL), WF_INVALID_ARGUMENT, "given twice");
    /* an input from another graph */
    wf_graph *other;
    wf_output z;
    CHECK_OK(wf_graph_new(&other));
    CHECK_OK(wf_placeholder(other, "z", WF_F32, 2, d23, &z));
    CHECK_ERR(wf_add(g, "cross", x, z, NULL), WF_INVALID_ARGUMENT, "comes from another graph");
    wf_graph_free(other);
    /* matmul inner dims */
    s = wf_matmul(g, "mm", x, x, 0, 0, NULL);
    CHECK_INT(wf_status_code(s), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(s), "node 'mm' (MatMul)");
    wf_status_free(s);
    CHECK_INT(wf_graph_num_nodes(g), before);
    /* the graph still builds fine */
    wf_output ok;
    CHECK_OK(wf_add(g, "ok", x, x, &ok));
    CHECK_INT(wf_graph_num_nodes(g), before + 1);
}

static void test_shape_inference(void)
{
    setup();
    int64_t dx[3] = {-1, 28, 28};
    wf_output x, f, m, b;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 3, dx, &x));
    CHECK_OK(wf_flatten(g, "flat", x, 1, &f));
    int64_t dims[8];
    CHECK_INT(wf_output_shape(f, dims), 2);
    CHECK_INT(dims[0], -1);
    CHECK_INT(dims[1], 784);
    int64_t wd[2] = {784, 10};
    wf_tensor *w;
    CHECK_OK(wf_tensor_new(WF_F32, 2, wd, NULL, &w));
    wf_output wc;
    CHECK_OK(wf_const(g, "w", w, &wc));
    wf_tensor_free(w);
    CHECK_OK(wf_matmul(g, "mm", f, wc, 0, 0, &m));
    CHECK_INT(wf_output_shape(m, dims), 2);
    CHECK_INT(dims[1], 10);
    CHECK_INT(wf_output_dtype(m), WF_F32);
    int64_t r[2] = {-1, 5};
    CHECK_OK(wf_reshape(g, "rs", m, 2, r, &b));
    CHECK_INT(wf_output_shape(b, dims), 2);
    CHECK_INT(dims[1], 5);
    /* an unknown-rank placeholder is allowed */
    wf_output u, ur;
    CHECK_OK(wf_placeholder(g, "u", WF_F32, -1, NULL, &u));
    CHECK_OK(wf_relu(g, NULL, u, &ur));
    CHECK_INT(wf_output_shape(ur, dims), -1);
}

/* ---- overflowing sizes: each is INVALID_ARGUMENT naming the node, the op and the shapes, and leaves the
 * graph as it was (issue 12). Expected counts are hand-worked. ---------------------------------------- */

#define P62 (INT64_C(1) << 62)

static wf_output cints(const char *name, int n, const int64_t *v)
{
    wf_tensor *t;
    wf_output o = {0};
    int64_t d[1] = {n};
    CHECK_OK(wf_tensor_new(WF_I64, 1, d, v, &t));
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

static wf_output cscalar(const char *name, wf_dtype dt, const void *v)
{
    wf_tensor *t;
    wf_output o = {0};
    CHECK_OK(wf_tensor_new(dt, 0, NULL, v, &t));
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

/* wf_op must fail with INVALID_ARGUMENT, a message holding every one of the NULL-terminated texts, and
 * leave the graph's node count unchanged. */
static void build_fails(const char *op, const char *name, const wf_output *in, int n_in, const wf_attr *attrs,
                        int n_attrs, const char *const *texts)
{
    int before = wf_graph_num_nodes(g);
    wf_status *s = wf_op(g, op, name, in, n_in, attrs, n_attrs, NULL);
    if (!s) {
        CHECK_FAIL_("%s '%s' built, expected INVALID_ARGUMENT", op, name);
        return;
    }
    if (wf_status_code(s) != WF_INVALID_ARGUMENT)
        CHECK_FAIL_("%s '%s': %s (%s), expected INVALID_ARGUMENT", op, name, wf_code_name(wf_status_code(s)),
                    wf_status_message(s));
    for (int i = 0; texts[i]; i++) CHECK_STR_CONTAINS(wf_status_message(s), texts[i]);
    CHECK(!strchr(wf_status_message(s), '\n'));
    wf_status_free(s);
    CHECK_INT(wf_graph_num_nodes(g), before);
    wf_node *n;
    s = wf_graph_find(g, name, &n);
    CHECK_INT(wf_status_code(s), WF_NOT_FOUND);
    wf_status_free(s);
}

#define FAILS(op, name, in, n_in, attrs, n_attrs, ...)                                                       \
    build_fails(op, name, in, n_in, attrs, n_attrs, (const char *const[]){__VA_ARGS__, NULL})

static void check_dims(wf_output o, int rank, const int64_t *want)
{
    int64_t d[8];
    CHECK_INT(wf_output_shape(o, d), rank);
    for (int i = 0; i < rank; i++) CHECK_INT(d[i], want[i]);
}

static void test_overflow_build(void)
{
    setup();
    int64_t d43[2] = {4, 3}, d10[1] = {10}, d11[2] = {1, 1}, big1[2] = {INT64_C(1) << 40, 1};
    wf_output x, v, o, h, ones, in[4];
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, d43, &x));
    CHECK_OK(wf_placeholder(g, "v", WF_F32, 1, d10, &v));
    CHECK_OK(wf_placeholder(g, "h", WF_F32, 2, big1, &h)); /* 2^40 x 1 f32: 4 TiB, a valid shape */
    CHECK_OK(wf_placeholder(g, "ones", WF_F32, 2, d11, &ones));

    /* Tile: one dim overflows (3 x 2^62), or the dims fit and their product does not (2^40 x 2^40) */
    int64_t rep[2] = {1, P62}, rep40[2] = {1, INT64_C(1) << 40};
    in[0] = x, in[1] = cints("rep", 2, rep);
    FAILS("Tile", "t", in, 2, NULL, 0, "node 't' (Tile)", "output dim 1 (3 x 4611686018427387904) overflows int64",
          "f32[4,3]", "[1,4611686018427387904]");
    in[0] = h, in[1] = cints("rep40", 2, rep40);
    FAILS("Tile", "t2", in, 2, NULL, 0, "node 't2' (Tile): output 0 shape f32[1099511627776,1099511627776] overflows int64",
          "f32[1099511627776,1]");

    /* Expand: [1,1] to [2^62, 4] overflows; to [2^31, 2^31] is 2^62 elements of 4 bytes, past the limit */
    int64_t e1[2] = {P62, 4}, e2[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
    in[0] = ones, in[1] = cints("e1", 2, e1);
    FAILS("Expand", "e", in, 2, NULL, 0, "node 'e' (Expand): output 0 shape f32[4611686018427387904,4] overflows int64",
          "f32[1,1]");
    in[1] = cints("e2", 2, e2);
    FAILS("Expand", "e2x", in, 2, NULL, 0, "node 'e2x' (Expand)", "4611686018427387904 elements", "2^62-byte limit");

    /* Reshape: the known dims' product overflows */
    int64_t rs[3] = {-1, P62, P62};
    in[0] = x, in[1] = cints("rs", 3, rs);
    FAILS("Reshape", "r", in, 2, NULL, 0, "node 'r' (Reshape): shape", "overflows int64: inputs f32[4,3], "
          "i64[3] = [-1,4611686018427387904,4611686018427387904]");

    /* ConstantOfShape: [2^40, 2^40] overflows; [2^61] f32 is 2^63 bytes */
    int64_t c1[2] = {INT64_C(1) << 40, INT64_C(1) << 40}, c2[1] = {INT64_C(1) << 61};
    in[0] = cints("c1", 2, c1);
    FAILS("ConstantOfShape", "cs", in, 1, NULL, 0, "node 'cs' (ConstantOfShape)", "overflows int64",
          "[1099511627776,1099511627776]");
    in[0] = cints("c2", 1, c2);
    FAILS("ConstantOfShape", "cs2", in, 1, NULL, 0, "node 'cs2' (ConstantOfShape)", "2^62-byte limit");

    /* Range: integer [INT64_MIN, INT64_MAX) by 1 has 2^64 - 1 elements; f64 0..1e300 by 1e-300 is infinite */
    int64_t lo = INT64_MIN, hi = INT64_MAX, one = 1, dmin = INT64_MIN;
    in[0] = cscalar("lo", WF_I64, &lo), in[1] = cscalar("hi", WF_I64, &hi), in[2] = cscalar("one", WF_I64, &one);
    FAILS("Range", "rg", in, 3, NULL, 0, "node 'rg' (Range): range(-9223372036854775808, 9223372036854775807, 1)",
          "int64");
    double f0 = 0, fbig = 1e300, ftiny = 1e-300, fnan = NAN;
    in[0] = cscalar("f0", WF_F64, &f0), in[1] = cscalar("fbig", WF_F64, &fbig), in[2] = cscalar("ftiny", WF_F64, &ftiny);
    FAILS("Range", "rgf", in, 3, NULL, 0, "node 'rgf' (Range): range(0, 1e+300, 1e-300) is too long");
    in[1] = cscalar("fnan", WF_F64, &fnan), in[2] = cscalar("fone", WF_F64, &(double){1});
    FAILS("Range", "rgn", in, 3, NULL, 0, "node 'rgn' (Range)", "too long");
    /* ... while extreme but finite ranges are counted exactly: ceil((2^63 - 1) / (2^63 - 1)) = 1 and
     * ceil(-(2^64 - 1) / -2^63) = 2 */
    int64_t zero = 0;
    in[0] = cscalar("z", WF_I64, &zero), in[1] = cscalar("hi2", WF_I64, &hi), in[2] = cscalar("hi3", WF_I64, &hi);
    CHECK_OK(wf_op(g, "Range", "rg1", in, 3, NULL, 0, &o.node));
    o.index = 0;
    check_dims(o, 1, (int64_t[]){1});
    in[0] = cscalar("hi4", WF_I64, &hi), in[1] = cscalar("lo2", WF_I64, &lo), in[2] = cscalar("dmin", WF_I64, &dmin);
    CHECK_OK(wf_op(g, "Range", "rg2", in, 3, NULL, 0, &o.node));
    check_dims(o, 1, (int64_t[]){2});

    /* Concat: four u8[2^61] sum to 2^63 along the axis */
    int64_t d61[1] = {INT64_C(1) << 61};
    for (int i = 0; i < 4; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "u%d", i);
        CHECK_OK(wf_placeholder(g, nm, WF_U8, 1, d61, &in[i]));
    }
    wf_attr ax0 = wf_attr_int("axis", 0);
    FAILS("Concat", "cat", in, 4, &ax0, 1, "node 'cat' (Concat): the sizes of axis 0 sum past int64", "u8[2305843009213693952]");

    /* Pad: 10 + (2^63 - 1) overflows */
    int64_t pads[2] = {INT64_MAX, 1};
    in[0] = v, in[1] = cints("pads", 2, pads);
    FAILS("Pad", "pad", in, 2, NULL, 0, "node 'pad' (Pad): padding axis 0 of data f32[10] by 9223372036854775807 and 1 "
          "overflows int64");

    /* Slice with extreme starts, ends and steps: numpy's a[0:10:2**63-1] has 1 element, a[-1:-2**63:-2**63]
     * has 1, a[-2**63:2**63-1] has all 10 */
    int64_t s0[1] = {0}, e10[1] = {10}, smax[1] = {INT64_MAX}, sm1[1] = {-1}, smin[1] = {INT64_MIN};
    wf_output sl;
    in[0] = v, in[1] = cints("s0", 1, s0), in[2] = cints("e10", 1, e10), in[3] = cints("stmax", 1, smax);
    wf_output sin5[5] = {v, in[1], in[2], cints("ax0", 1, s0), in[3]};
    CHECK_OK(wf_op(g, "Slice", "sl1", sin5, 5, NULL, 0, &sl.node));
    sl.index = 0;
    check_dims(sl, 1, (int64_t[]){1});
    sin5[1] = cints("sm1", 1, sm1), sin5[2] = cints("smin", 1, smin), sin5[4] = cints("stmin", 1, smin);
    CHECK_OK(wf_op(g, "Slice", "sl2", sin5, 5, NULL, 0, &sl.node));
    check_dims(sl, 1, (int64_t[]){1});
    sin5[1] = cints("smin2", 1, smin), sin5[2] = cints("smax2", 1, smax), sin5[4] = cints("one1", 1, (int64_t[]){1});
    CHECK_OK(wf_op(g, "Slice", "sl3", sin5, 5, NULL, 0, &sl.node));
    check_dims(sl, 1, (int64_t[]){10});

    /* Split: sizes whose sum overflows */
    int64_t sp[2] = {INT64_MAX, 1};
    in[0] = v, in[1] = cints("sp", 2, sp);
    wf_attr spa[2] = {wf_attr_int("axis", 0), wf_attr_int("num_outputs", 2)};
    FAILS("Split", "split", in, 2, spa, 2, "node 'split' (Split): split sizes sum past int64");

    /* OneHot: 2^20 indices x depth 1e15 has more than 2^62 elements... of 4 bytes: 4e21 bytes */
    int64_t d20[1] = {INT64_C(1) << 20};
    wf_output idx, vals;
    CHECK_OK(wf_placeholder(g, "idx", WF_I64, 1, d20, &idx));
    CHECK_OK(wf_placeholder(g, "vals", WF_F32, 1, (int64_t[]){2}, &vals));
    wf_output oh[3] = {idx, cscalar("depth", WF_F64, &(double){1e15}), vals};
    FAILS("OneHot", "oh", oh, 3, NULL, 0, "node 'oh' (OneHot)", "overflows int64", "i64[1048576]");

    /* Conv2D / MaxPool2D: huge dilations and pads overflow the window arithmetic; a huge stride is fine */
    int64_t xd[4] = {1, 1, 5, 5}, wd[4] = {1, 1, 3, 3};
    wf_output cx, cw;
    CHECK_OK(wf_placeholder(g, "cx", WF_F32, 4, xd, &cx));
    CHECK_OK(wf_placeholder(g, "cw", WF_F32, 4, wd, &cw));
    wf_output cin[2] = {cx, cw};
    int64_t dil[2] = {P62, 1}, hp[4] = {INT64_MAX, 0, 0, 0}, hs[2] = {INT64_MAX, INT64_MAX}, k3[2] = {3, 3};
    wf_attr a_dil = wf_attr_ints("dilations", dil, 2), a_pad = wf_attr_ints("pads", hp, 4);
    FAILS("Conv2D", "conv_d", cin, 2, &a_dil, 1, "node 'conv_d' (Conv2D)", "overflows int64");
    FAILS("Conv2D", "conv_p", cin, 2, &a_pad, 1, "node 'conv_p' (Conv2D)", "overflows int64");
    wf_attr a_st = wf_attr_ints("strides", hs, 2);
    CHECK_OK(wf_op(g, "Conv2D", "conv_s", cin, 2, &a_st, 1, &o.node));
    check_dims(o, 4, (int64_t[]){1, 1, 1, 1}); /* floor((5 - 3) / s) + 1 */
    wf_attr pa[3] = {wf_attr_ints("kernel_shape", k3, 2), wf_attr_ints("strides", hs, 2), wf_attr_int("ceil_mode", 1)};
    CHECK_OK(wf_op(g, "MaxPool2D", "pool_s", &cx, 1, pa, 3, &o.node));
    check_dims(o, 4, (int64_t[]){1, 1, 1, 1});
    wf_attr pp[2] = {wf_attr_ints("kernel_shape", k3, 2), wf_attr_ints("pads", hp, 4)};
    FAILS("MaxPool2D", "pool_p", &cx, 1, pp, 2, "node 'pool_p' (MaxPool2D)", "overflows int64");

    /* Resize: a scale of 1e30 gives a dim past 2^62 */
    wf_tensor *sc;
    float scv[4] = {1, 1, 1e30f, 1};
    CHECK_OK(wf_tensor_new(WF_F32, 1, (int64_t[]){4}, scv, &sc));
    wf_output scales;
    CHECK_OK(wf_const(g, "scales", sc, &scales));
    wf_tensor_free(sc);
    wf_output rin[3] = {cx, {0}, scales};
    FAILS("Resize", "rsz", rin, 3, NULL, 0, "node 'rsz' (Resize)", "past 2^62");

    /* MatMul: batch dims that broadcast to [2^31, 2^31] x [4, 4] */
    int64_t ma[4] = {INT64_C(1) << 31, 1, 4, 4}, mb[4] = {1, INT64_C(1) << 31, 4, 4};
    wf_output mx, my;
    CHECK_OK(wf_placeholder(g, "ma", WF_F32, 4, ma, &mx));
    CHECK_OK(wf_placeholder(g, "mb", WF_F32, 4, mb, &my));
    wf_output mm[2] = {mx, my};
    FAILS("MatMul", "mm", mm, 2, NULL, 0, "node 'mm' (MatMul)", "overflows int64", "f32[2147483648,1,4,4]");

    /* DepthToSpace: blocksize^2 overflows */
    wf_attr bsz = wf_attr_int("blocksize", INT64_C(1) << 32);
    FAILS("DepthToSpace", "d2s", &cx, 1, &bsz, 1, "node 'd2s' (DepthToSpace): blocksize^2", "overflows int64");

    /* Placeholder: the declared shape itself */
    int64_t ph[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    int before = wf_graph_num_nodes(g);
    CHECK_ERR(wf_placeholder(g, "ph", WF_F32, 2, ph, NULL), WF_INVALID_ARGUMENT, "node 'ph' (Placeholder): output 0 shape");
    CHECK_INT(wf_graph_num_nodes(g), before);

    /* the graph still builds */
    CHECK_OK(wf_op(g, "Relu", "after", &x, 1, NULL, 0, NULL));
}

int main(void)
{
    RUN_TEST(test_names);
    RUN_TEST(test_errors_leave_graph_unchanged);
    RUN_TEST(test_shape_inference);
    RUN_TEST(test_overflow_build);
    wf_graph_free(g);
    return check_summary();
}
