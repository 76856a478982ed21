/* Convenience builders of the public API: thin wrappers over wf_op. */
#include "graph/graph.h"

#include <stdio.h>

static wf_status *op1(wf_graph *g, const char *op, const char *name, const wf_output *in, int n_in,
                      const wf_attr *attrs, int n_attrs, wf_output *out)
{
    wf_node *n;
    WF__TRY(wf_op(g, op, name, in, n_in, attrs, n_attrs, &n));
    if (out) *out = wf_out(n, 0);
    return NULL;
}

wf_status *wf_placeholder(wf_graph *g, const char *name, wf_dtype dtype, int rank, const int64_t *dims,
                          wf_output *out)
{
    wf_attr a[2] = {wf_attr_dtype("dtype", dtype), wf_attr_ints("shape", dims, rank)};
    return op1(g, "Placeholder", name, NULL, 0, a, rank >= 0 ? 2 : 1, out);
}

wf_status *wf_const(wf_graph *g, const char *name, const wf_tensor *value, wf_output *out)
{
    wf_attr a = wf_attr_tensor("value", value);
    return op1(g, "Const", name, NULL, 0, &a, 1, out);
}

wf_status *wf_const_scalar(wf_graph *g, const char *name, wf_dtype dtype, double value, wf_output *out)
{
    wf_tensor *t;
    WF__TRY(wf_tensor_new(dtype, 0, NULL, NULL, &t));
    wf__store_f64(t->data, dtype, 0, value);
    wf_status *s = wf_const(g, name, t, out);
    wf_tensor_free(t);
    return s;
}

wf_status *wf_unary(wf_graph *g, const char *op, const char *name, wf_output x, wf_output *out)
{
    return op1(g, op, name, &x, 1, NULL, 0, out);
}

wf_status *wf_binary(wf_graph *g, const char *op, const char *name, wf_output a, wf_output b,
                     wf_output *out)
{
    wf_output in[2] = {a, b};
    return op1(g, op, name, in, 2, NULL, 0, out);
}

wf_status *wf_add(wf_graph *g, const char *name, wf_output a, wf_output b, wf_output *out)
{
    return wf_binary(g, "Add", name, a, b, out);
}

wf_status *wf_mul(wf_graph *g, const char *name, wf_output a, wf_output b, wf_output *out)
{
    return wf_binary(g, "Mul", name, a, b, out);
}

wf_status *wf_relu(wf_graph *g, const char *name, wf_output x, wf_output *out)
{
    return wf_unary(g, "Relu", name, x, out);
}

wf_status *wf_matmul(wf_graph *g, const char *name, wf_output a, wf_output b, int transpose_a,
                     int transpose_b, wf_output *out)
{
    wf_output in[2] = {a, b};
    wf_attr at[2] = {wf_attr_int("transpose_a", transpose_a), wf_attr_int("transpose_b", transpose_b)};
    return op1(g, "MatMul", name, in, 2, at, 2, out);
}

wf_status *wf_bias_add(wf_graph *g, const char *name, wf_output x, wf_output bias, wf_output *out)
{
    return wf_binary(g, "BiasAdd", name, x, bias, out);
}

wf_status *wf_softmax(wf_graph *g, const char *name, wf_output x, int axis, wf_output *out)
{
    wf_attr a = wf_attr_int("axis", axis);
    return op1(g, "Softmax", name, &x, 1, &a, 1, out);
}

wf_status *wf_flatten(wf_graph *g, const char *name, wf_output x, int axis, wf_output *out)
{
    wf_attr a = wf_attr_int("axis", axis);
    return op1(g, "Flatten", name, &x, 1, &a, 1, out);
}

/* The shape becomes a Const named "<name>/shape" so shape inference sees it. */
wf_status *wf_reshape(wf_graph *g, const char *name, wf_output x, int rank, const int64_t *dims,
                      wf_output *out)
{
    if (rank < 0 || rank > WF_MAX_RANK)
        return wf__status(WF_INVALID_ARGUMENT, "node '%s' (Reshape): rank %d is outside 0..%d",
                          name ? name : "Reshape", rank, WF_MAX_RANK);
    wf_tensor *t;
    int64_t r = rank;
    WF__TRY(wf_tensor_new(WF_I64, 1, &r, dims, &t));
    char cname[300];
    wf_output shape;
    wf_status *s;
    if (name) {
        snprintf(cname, sizeof cname, "%s/shape", name);
        s = wf_const(g, cname, t, &shape);
    } else {
        s = wf_const(g, NULL, t, &shape);
    }
    wf_tensor_free(t);
    if (s) return s;
    wf_output in[2] = {x, shape};
    s = op1(g, "Reshape", name, in, 2, NULL, 0, out);
    if (s) wf__graph_pop(g); /* leave the graph as it was */
    return s;
}

wf_status *wf_variable(wf_graph *g, const char *name, const wf_tensor *initial, wf_output *out)
{
    if (!initial) return wf__status(WF_INVALID_ARGUMENT, "variable '%s': the initial value is NULL", name ? name : "");
    wf_attr a = wf_attr_tensor("value", initial);
    return op1(g, "Variable", name, NULL, 0, &a, 1, out);
}

wf_status *wf_assign(wf_graph *g, const char *name, wf_output variable, wf_output value, wf_output *out)
{
    const wf_node *v = variable.node;
    if (!v || strcmp(wf_node_op(v), "Variable") != 0)
        return wf__status(WF_INVALID_ARGUMENT, "assign '%s': node '%s' is not a Variable", name ? name : "",
                          v ? wf_node_name(v) : "(null)");
    char a[160], b[160];
    int64_t vd[WF_MAX_RANK], xd[WF_MAX_RANK];
    int vr = wf_output_shape(variable, vd), xr = wf_output_shape(value, xd);
    bool same = wf_output_dtype(variable) == wf_output_dtype(value) && (xr < 0 || xr == vr);
    for (int d = 0; same && xr > 0 && d < xr; d++) same = xd[d] < 0 || xd[d] == vd[d];
    if (!same)
        return wf__status(WF_INVALID_ARGUMENT, "assign '%s': variable '%s' is %s%s but the value is %s%s",
                          name ? name : "", wf_node_name(v), wf_dtype_name(wf_output_dtype(variable)),
                          wf__shape_str(vr, vd, a), wf_dtype_name(wf_output_dtype(value)),
                          xr < 0 ? "[?]" : wf__shape_str(xr, xd, b));
    wf_attr at = wf_attr_string("variable", wf_node_name(v));
    return op1(g, "Assign", name, &value, 1, &at, 1, out);
}

/* ---- files and images (ops_image.c) ---------------------------------------------------------------- */

wf_status *wf_read_file(wf_graph *g, const char *name, wf_output path, wf_output *out)
{
    return op1(g, "ReadFile", name, &path, 1, NULL, 0, out);
}

wf_status *wf_decode_jpeg(wf_graph *g, const char *name, wf_output contents, int channels, wf_output *out)
{
    wf_attr a = wf_attr_int("channels", channels);
    return op1(g, "DecodeJpeg", name, &contents, 1, &a, 1, out);
}

wf_status *wf_decode_png(wf_graph *g, const char *name, wf_output contents, int channels, wf_output *out)
{
    wf_attr a = wf_attr_int("channels", channels);
    return op1(g, "DecodePng", name, &contents, 1, &a, 1, out);
}

wf_status *wf_convert_image_dtype(wf_graph *g, const char *name, wf_output image, wf_dtype dtype, wf_output *out)
{
    wf_attr a = wf_attr_dtype("dtype", dtype);
    return op1(g, "ConvertImageDtype", name, &image, 1, &a, 1, out);
}

wf_status *wf_random_brightness(wf_graph *g, const char *name, wf_output image, wf_output seed, double max_delta,
                                wf_output *out)
{
    wf_output in[2] = {image, seed};
    wf_attr a = wf_attr_float("max_delta", max_delta);
    return op1(g, "StatelessRandomBrightness", name, in, 2, &a, 1, out);
}

wf_status *wf_random_contrast(wf_graph *g, const char *name, wf_output image, wf_output seed, double lower,
                              double upper, wf_output *out)
{
    wf_output in[2] = {image, seed};
    wf_attr a[2] = {wf_attr_float("lower", lower), wf_attr_float("upper", upper)};
    return op1(g, "StatelessRandomContrast", name, in, 2, a, 2, out);
}

wf_status *wf_random_flip_left_right(wf_graph *g, const char *name, wf_output image, wf_output seed,
                                     wf_output *out)
{
    wf_output in[2] = {image, seed};
    return op1(g, "StatelessRandomFlipLeftRight", name, in, 2, NULL, 0, out);
}

wf_status *wf_random_crop(wf_graph *g, const char *name, wf_output image, wf_output seed, const int64_t size[3],
                          wf_output *out)
{
    if (!size) return wf__status(WF_INVALID_ARGUMENT, "node '%s' (StatelessRandomCrop): size is NULL", name ? name : "(unnamed)");
    wf_output in[2] = {image, seed};
    wf_attr a = wf_attr_ints("size", size, 3);
    return op1(g, "StatelessRandomCrop", name, in, 2, &a, 1, out);
}
