/*
 * Reverse-mode autodiff internals: the helpers gradient functions build their backward nodes with
 * (graph/grad.c) and the gradient functions the op tables point at (graph/grad_ops*.c). Every helper
 * adds ordinary nodes named under the context's prefix; wf_gradients removes them all on any error.
 */
#ifndef WF_GRAPH_GRAD_H
#define WF_GRAPH_GRAD_H

#include "graph/graph.h"

/* The node `op` over in[0..n_in), named prefix + nm (a suffix _1, _2, ... makes it unique); *out is
 * its output 0. */
wf_status *wf__g_op(wf__grad_ctx *c, const char *op, const char *nm, const wf_output *in, int n_in,
                    const wf_attr *at, int n_at, wf_output *out);
wf_status *wf__g_un(wf__grad_ctx *c, const char *op, const char *nm, wf_output x, wf_output *out);
wf_status *wf__g_bin(wf__grad_ctx *c, const char *op, const char *nm, wf_output a, wf_output b, wf_output *out);
/* A rank-0 Const of dtype dt. */
wf_status *wf__g_scalar(wf__grad_ctx *c, const char *nm, wf_dtype dt, double v, wf_output *out);
/* A 1-D i64 Const (shapes, axes, pads). */
wf_status *wf__g_ints(wf__grad_ctx *c, const char *nm, int n, const int64_t *v, wf_output *out);
/* x's shape as an i64 vector: a Const when every dim is known, else a Shape node. */
wf_status *wf__g_shape_of(wf__grad_ctx *c, const char *nm, wf_output x, wf_output *out);
/* A tensor of x's shape and dtype filled with v. */
wf_status *wf__g_fill_like(wf__grad_ctx *c, const char *nm, wf_output x, double v, wf_output *out);
/* v reshaped to x's shape (v itself when the shapes are known to be equal). */
wf_status *wf__g_reshape_like(wf__grad_ctx *c, const char *nm, wf_output v, wf_output x, wf_output *out);
/* Undoes numpy broadcasting: sums v (the shape of a broadcast result) down to the shape of x, the
 * operand that was broadcast. others are the operands x was broadcast with: a dim of x that is
 * unknown while building is not broadcast when every other operand has 1 or nothing there. The
 * last `exact_tail` axes never broadcast (MatMul's matrix dims). When the broadcast axes cannot be
 * told while building, they are found at run time (Shape, Equal, NonZero). */
wf_status *wf__g_sum_to(wf__grad_ctx *c, const char *nm, wf_output v, wf_output x, const wf_output *others,
                        int n_others, int exact_tail, wf_output *out);
/* "node 'N' (Op): gradient: <message>" with the given code. */
wf_status *wf__g_fail(const wf__grad_ctx *c, wf_code code, const char *fmt, ...) WF__PRINTF(3, 4);
/* A constant integer vector input of the node (a Const or folded value, i32/i64, rank <= 1); false if
 * absent or not known while building. */
bool wf__g_const_ints(const wf__grad_ctx *c, int idx, int64_t *vals, int max, int *n);
static inline const wf__tinfo *wf__g_info(wf_output o) { return &o.node->out[o.index]; }

/* Gradient functions (graph/grad_ops.c, grad_ops_shape.c). */
wf_status *wf__grad_identity(wf__grad_ctx *c);
/* Piecewise-constant ops (Sign, Floor, Ceil, Round): zero almost everywhere, so no gradient flows,
 * as in TensorFlow, rather than an error. */
wf_status *wf__grad_none(wf__grad_ctx *c);
wf_status *wf__grad_add(wf__grad_ctx *c);
wf_status *wf__grad_sub(wf__grad_ctx *c);
wf_status *wf__grad_mul(wf__grad_ctx *c);
wf_status *wf__grad_div(wf__grad_ctx *c);
wf_status *wf__grad_pow(wf__grad_ctx *c);
wf_status *wf__grad_maximum(wf__grad_ctx *c);
wf_status *wf__grad_minimum(wf__grad_ctx *c);
wf_status *wf__grad_where(wf__grad_ctx *c);
wf_status *wf__grad_unary(wf__grad_ctx *c); /* every one-input elementwise op, by op name */
wf_status *wf__grad_clip(wf__grad_ctx *c);
wf_status *wf__grad_cast(wf__grad_ctx *c);
wf_status *wf__grad_prelu(wf__grad_ctx *c);
wf_status *wf__grad_variadic(wf__grad_ctx *c); /* Sum, Mean, Max, Min */
wf_status *wf__grad_matmul(wf__grad_ctx *c);
wf_status *wf__grad_gemm(wf__grad_ctx *c);
wf_status *wf__grad_bias_add(wf__grad_ctx *c);
wf_status *wf__grad_reduce(wf__grad_ctx *c); /* ReduceSum/Mean/Max/Min/Prod/L2/LogSumExp */
wf_status *wf__grad_softmax(wf__grad_ctx *c);
wf_status *wf__grad_log_softmax(wf__grad_ctx *c);
wf_status *wf__grad_layer_norm(wf__grad_ctx *c);
wf_status *wf__grad_batch_norm(wf__grad_ctx *c);
wf_status *wf__grad_fused_batch_norm(wf__grad_ctx *c);
wf_status *wf__grad_dropout(wf__grad_ctx *c);
wf_status *wf__grad_reshape_like(wf__grad_ctx *c); /* Reshape, Flatten, Squeeze, Unsqueeze */
wf_status *wf__grad_transpose(wf__grad_ctx *c);
wf_status *wf__grad_concat(wf__grad_ctx *c);
wf_status *wf__grad_split(wf__grad_ctx *c);
wf_status *wf__grad_slice(wf__grad_ctx *c);
wf_status *wf__grad_gather(wf__grad_ctx *c);
wf_status *wf__grad_pad(wf__grad_ctx *c);
wf_status *wf__grad_expand(wf__grad_ctx *c);
wf_status *wf__grad_tile(wf__grad_ctx *c);

#endif
