/*
 * The graph optimiser (the pipeline's "optimize" stage, between build and place): device-independent
 * passes that rewrite the part of a graph a run needs into a new graph, which planning then places and
 * lowers. The user's graph is never changed.
 *
 * How a pass works: the driver (pipeline.c) walks the source graph's live nodes in creation order (a
 * topological order) and asks the pass, for each node with its inputs already mapped into the new
 * graph, what the node becomes: a copy (the default), an existing output of the new graph (the node
 * is dropped and its readers read that instead), or a constant. Passes run one after another, each on
 * the previous one's output, and the maps compose, so every output of the user's graph that a run
 * names (feeds, fetches, variables) is found in the final graph.
 *
 * Level 1 (wf_session_options.opt_level >= 1), in this order:
 *   identity  removes Identity, Pad by constant zero pads, inference-mode Dropout (no mask read, training_mode absent or a false
 *             constant) and Casts to the input's own dtype
 *   simplify  x+0, x-0, x*1, x/1 -> x; Neg(Neg(x)) -> x; Transpose chains composed (or removed when
 *             the identity); Reshape/Flatten/Squeeze/Unsqueeze chains collapsed into one Reshape, or
 *             removed when they give back x's shape (simplify.c says exactly when)
 *   bnfold    folds an inference BatchNormalization into the Conv2D, MatMul or Gemm before it
 *             (constant weight and statistics, that node read by nothing else)
 *   matmul_bias  MatMul + Add(constant bias along the last dim) -> MatMul + BiasAdd, which level 2
 *             fuses (ONNX Runtime's MatMul + Add -> Gemm)
 *   fold      replaces a node of constants by a constant: the value shape inference computed when it
 *             was built, or else the node run once by its CPU kernel (through o->eval), up to a
 *             size cap (fold.c)
 *   cse       merges nodes with the same op, inputs and attributes (never sources or stateful ops)
 *   attention multi-head attention written in ops (MatMul, scale, constant mask, Softmax, MatMul and the
 *             heads' Reshapes and Transposes) -> one ONNX Attention node, f32 (attention.c)
 *   conv_crop drops a convolution's kernel taps that read only padding (conv_crop.c)
 *   conv_pool moves a 1x1 convolution read only by an average pool after the pool (conv_pool.c)
 *   conv_scale moves a per-channel scale of an ungrouped convolution's input into its weight (conv_scale.c)
 * With a precision (wf__opt_options.amp), at every level, after matmul_bias and before fold:
 *   amp       automatic mixed precision: allow/infer/clear/deny lists, casts at the boundaries (amp.c)
 * Level 2 (the default) adds "fuse", which runs after placement, in lowering (lower/plan.c): MatMul or
 * Conv2D + BiasAdd + an activation (Relu, LeakyRelu, Sigmoid, Tanh, Swish, HardSwish, Gelu, Clip from 0)
 * as one kernel, f32, where the device has that kernel (the CPU today), with "residual" (an Add of the
 * result's own shape taken into the Conv2D or MatMul) and the CPU's prologues (a Softmax taking the Div
 * and mask Add before it, a LayerNormalization the Add before it, a Resize its u8 Cast); and "jit",
 * clusters of elementwise ops as one generated kernel each (lower/jit.c).
 * Level 3 adds "layout", channel-blocked layouts kept between convolutions (lower/layout.c).
 * Nodes a run feeds, variables and stateful ops are always kept. Copies keep their node's name, device
 * request and colocation group; constants share the source graph's tensors (no copy of the weights).
 */
#ifndef WF_PASSES_PASSES_H
#define WF_PASSES_PASSES_H

#include "graph/graph.h"

typedef struct wf__opt_options {
    int level;            /* 0: no pass; 1: the graph passes; 2: and lowering's fusion */
    const char *disabled; /* comma-separated pass names to skip, or NULL */
    const char *dump_dir; /* when not NULL: each pass writes DIR/NN-NAME.txt, the graph after it */
    /* Runs graph g (constants and nodes, no feeds) on the CPU and returns outputs[0..n) in values
     * (the caller frees them), for fold's constants computed by kernels; NULL: fold only what shape
     * inference knows. The session gives it (the optimiser cannot reach execution itself). */
    wf_status *(*eval)(void *arg, wf_graph *g, const wf_output *outputs, int n, wf_tensor **values);
    void *eval_arg;
    /* Mixed precision ("amp", amp.c): WF_BF16 or WF_F16 converts ops to that dtype, at any level; 0 or
     * WF_F32: off. amp_lists: the session's edits of the op lists ("allow+=Op;deny-=Op"), or NULL. */
    wf_dtype amp;
    const char *amp_lists;
    /* Whether node n may run with inputs `in` and outputs `out` (its f32 ones given as amp) on the
     * device it would be placed on: a kernel there, and with need_fast a device that computes amp
     * natively. When not, why, naming the device; when so, which device (both into why). The session
     * gives it (the optimiser does not know the devices); NULL converts nothing. */
    bool (*amp_device)(void *arg, const wf_node *n, const wf__tinfo *in, const wf__tinfo *out, bool need_fast,
                       char *why, size_t cap);
    void *amp_arg;
} wf__opt_options;

/* The optimised graph of one set of roots, and where each source output went. */
typedef struct wf__optimized {
    wf_graph *g;
    const wf_graph *src;
    int n_src;            /* source nodes covered by map */
    wf_output **map;      /* [source node id][output index] -> output of g; node NULL: not kept */
    int removed;          /* source nodes not in g (pruned, removed, merged or folded) */
    char *amp_report;     /* amp's decision per node and its totals, when it ran; else NULL */
} wf__optimized;

/* Optimises the part of g that `roots` (fetches and targets) need, keeping every node of `keep`
 * (fed nodes) whether or not the roots need them. Errors name the pass and the node. */
wf_status *wf__optimize(const wf_graph *g, const wf_output *roots, int n_roots, const wf_output *keep, int n_keep,
                        const wf__opt_options *o, wf__optimized **out);
void wf__optimized_free(wf__optimized *o);
/* Whether lowering fuses epilogues (level >= 2, "fuse" not disabled). */
bool wf__opt_fuses(const wf__opt_options *o);
/* Whether lowering generates elementwise kernels (level >= 2, "fuse" and "jit" not disabled). */
bool wf__opt_jit(const wf__opt_options *o);
/* Whether lowering takes residual Adds into Conv2D and MatMul (level 2, not disabled as "residual"). */
bool wf__opt_residual(const wf__opt_options *o);
/* Whether lowering plans channel-blocked layouts (level 3, with "fuse" and "layout" not disabled). */
bool wf__opt_layout(const wf__opt_options *o);
/* The options' errors (a level out of range, an unknown pass to disable), as a session reports them
 * when it is made. */
wf_status *wf__opt_check(const wf__opt_options *o);
/* Errors of a precision and of amp list edits (an unknown list or op), as a session reports them. */
wf_status *wf__amp_check(wf_dtype amp, const char *edits);
/* Where output `x` of the source graph is in the optimised one ({NULL, 0} if nowhere). */
wf_output wf__optimized_map(const wf__optimized *o, wf_output x);

/* The passes' names, in pipeline order, NULL-terminated (for --disable-pass and its error message). */
extern const char *const wf__pass_names[];

#endif
