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

int main(void)
{
    RUN_TEST(test_names);
    RUN_TEST(test_errors_leave_graph_unchanged);
    RUN_TEST(test_shape_inference);
    wf_graph_free(g);
    return check_summary();
}
