/*
 * The op registry: one table entry per op with its signature, attributes and defaults, shape/dtype
 * inference, and cost. Op groups live in sibling files (ops_elementwise.c, ops_shape.c, ops_nn.c,
 * ops_reduce.c) that each export a table terminated by an entry whose name is NULL; registry.c lists
 * the tables.
 */
#ifndef WF_GRAPH_OP_H
#define WF_GRAPH_OP_H

#include "core/core.h"
#include "ops/op.h"

/* An omitted optional input (ONNX-style, wf_output.node == NULL) shows as dtype WF_DTYPE_INVALID and
 * rank -1 here, and as in[i] == NULL in a kernel.
 *
 * What shape inference sees of one node. in_value[i] is the input's value when it is known while
 * building (a Const, or something folded from constants), else NULL. */
typedef struct wf__infer_ctx {
    const char *node;        /* node name, for messages */
    const wf__op_def *op;
    const wf__attr *attrs;
    int n_in;
    const wf__tinfo *in;
    wf_tensor *const *in_value;
    int n_out;
    wf__tinfo *out;          /* to fill: dtype and (possibly partly unknown) shape */
    wf_tensor **out_value;   /* optional: infer may store a constant value it computed (caller owns) */
} wf__infer_ctx;

/* What a gradient function sees: the forward node, the gradient flowing into each of its outputs
 * (dy[j].node == NULL: none reaches that output, treat it as zero), and where to put the gradient of
 * each input (leave dx[i].node NULL for none: integer inputs, shapes, indices). It adds the backward
 * nodes to g through the ordinary builders, named under `prefix` ("gradients/<node>/"). */
typedef struct wf__grad_ctx {
    wf_graph *g;
    const wf_node *node;
    const wf_output *dy;     /* node->n_out entries */
    wf_output *dx;           /* node->n_in entries, zeroed by the caller */
    const char *prefix;
} wf__grad_ctx;

/* "node 'NAME' (OP): message" with the given code. */
wf_status *wf__infer_fail(const wf__infer_ctx *ctx, wf_code code, const char *fmt, ...) WF__PRINTF(3, 4);
/* Bytes a node reads and writes: its given inputs and its outputs (cost functions; ops_nn.c). */
double wf__cost_io_bytes(const wf__infer_ctx *ctx);

/* An overflowing size: INVALID_ARGUMENT "node 'NAME' (OP): message: inputs f32[4,3], i64[2] = [1,2^62]". */
wf_status *wf__infer_overflow(const wf__infer_ctx *ctx, const char *fmt, ...) WF__PRINTF(2, 3);
/* Every fully known output shape has an element count that fits int64 and at most 2^62 bytes
 * (wf__node_infer runs it after each op's infer, so later stages may multiply known dims freely). */
wf_status *wf__infer_check_sizes(const wf__infer_ctx *ctx);

/* Shorthands inside an infer function. */
#define WF__IC_I(ic, nm) wf__attr_i((ic)->op, (ic)->attrs, nm)
#define WF__IC_F(ic, nm) wf__attr_f((ic)->op, (ic)->attrs, nm)
#define WF__IC_S(ic, nm) wf__attr_s((ic)->op, (ic)->attrs, nm)
#define WF__IC_A(ic, nm) wf__attr_get((ic)->op, (ic)->attrs, nm)

/* Common infer helpers (registry.c). */
wf_status *wf__infer_same_as_input0(wf__infer_ctx *ctx);  /* out0 = in0 */
/* Requires in[idx] dtype to be in mask (WF__DT_* bits); error names the op and the dtype. */
wf_status *wf__infer_check_dtype(const wf__infer_ctx *ctx, int idx, uint32_t mask);
/* Reads an integer vector from a known input value (i32 or i64, rank <= 1); false if unknown. */
bool wf__infer_const_ints(const wf__infer_ctx *ctx, int idx, int64_t *vals, int max, int *n);

/* The op of the copy nodes that partitioning inserts (registry.c; not in the lookup tables). */
extern const wf__op_def wf__copy_op;
/* The op of a generated elementwise kernel's plan node (lower/jit.c; registry.c, not in the tables). */
extern const wf__op_def wf__fused_elementwise_op;

/* Lookup by name; NULL if unknown. */
const wf__op_def *wf__op_lookup(const char *name);
/* Calls fn for every registered op (for docs and tests). */
void wf__op_foreach(void (*fn)(const wf__op_def *op, void *user), void *user);

/* Tables, one per group file. */
extern const wf__op_def wf__ops_core[];        /* registry.c: Const, Placeholder, Identity */
extern const wf__op_def wf__ops_elementwise[]; /* ops_elementwise.c */
extern const wf__op_def wf__ops_shape[];       /* ops_shape.c */
extern const wf__op_def wf__ops_nn[];          /* ops_nn.c: MatMul, Gemm, BiasAdd, Conv, pools */
extern const wf__op_def wf__ops_reduce[];      /* ops_reduce.c: reductions, softmax, norms */
extern const wf__op_def wf__ops_math[];        /* ops_math.c: more unary math and activations */
extern const wf__op_def wf__ops_misc[];        /* ops_misc.c: ops the ONNX suite asks for (TopK, CumSum, ...) */
extern const wf__op_def wf__ops_onnx[];        /* ops_onnx.c: losses, attention, quantization, ... */
extern const wf__op_def wf__ops_rnn_image[];       /* ops_rnn_image.c: recurrent, signal, detection ops */
extern const wf__op_def wf__ops_nn_grad[];     /* ops_nn_grad.c: conv and pool backward ops */
extern const wf__op_def wf__ops_train[];       /* ops_train.c: ApplyAdam, StatelessRandomUniform */
extern const wf__op_def wf__ops_image[];       /* ops_image.c: ReadFile, image decoding and augmentation */

#endif
