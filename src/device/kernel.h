/*
 * The kernel interface and registry. A kernel is registered for (op, device type, dtypes) and runs one
 * node of a plan: it reads its input tensors, allocates its outputs through the context (which may
 * hand it an input buffer to reuse in place), and reports errors naming the node.
 */
#ifndef WF_DEVICE_KERNEL_H
#define WF_DEVICE_KERNEL_H

#include <stdio.h>

#include "ops/op.h"

typedef struct wf__kctx wf__kctx;
typedef struct wf__intra wf__intra;

/* A generated elementwise kernel: the program that lowering's "jit" pass (optimisation level 2,
 * lower/jit.c) makes of a cluster of elementwise ops, for the device's FusedElementwise kernel to run
 * over the node's n output elements in one pass. Values 0 .. n_in-1 are the node's inputs, value
 * n_in + i is instruction i's result, and the last instruction's result is output 0. Every value is
 * f32. Output element e reads element (e / in[i].inner) % in[i].period of input i: period n is an
 * input of the output's shape, 1 a scalar, anything else one broadcast run (a bias over the last dims,
 * one value per channel). */
typedef struct wf__ew_input {
    int64_t inner, period;
} wf__ew_input;

typedef struct wf__ew_insn {
    const char *op;     /* the graph op: Add, Mul, Relu, Tanh, ... (see lower/jit.c for the list) */
    int a, b;           /* operand values; b is -1 for a unary op */
    double alpha, beta; /* LeakyRelu, Elu and Swish: alpha; Clip: [alpha, beta]; Gelu: alpha 1 = tanh form */
} wf__ew_insn;

/* A program's instructions plus its broadcast inputs (neither its output's size nor a scalar) number
 * at most this, so a device can hold every intermediate value of a tile in registers it sizes once. */
#define WF__EW_MAX_REGS 16

typedef struct wf__ew_program {
    int n_in, n_insn;
    const wf__ew_input *in;
    const wf__ew_insn *insn;
    int64_t n;          /* output elements */
    uint64_t hash;      /* of the ops, operands, attributes and input patterns */
} wf__ew_program;

/* What input i of a program is: the output's size (read at e), a scalar, or a broadcast run. */
enum { WF__EW_FULL, WF__EW_SCALAR, WF__EW_BCAST };
static inline int wf__ew_kind(const wf__ew_program *pg, int i)
{
    if (pg->in[i].inner == 1 && pg->in[i].period == pg->n) return WF__EW_FULL;
    return pg->in[i].period == 1 ? WF__EW_SCALAR : WF__EW_BCAST;
}

/* Parallel loop over [0, n): fn(arg, begin, end) on the intra-op threads when n is at least
 * 2 * grain and the pool is free; otherwise inline on the calling thread. fn must not fail. */
typedef void (*wf__range_fn)(void *arg, int64_t begin, int64_t end);
void wf__parallel_for(wf__kctx *k, int64_t n, int64_t grain, wf__range_fn fn, void *arg);
/* The most threads a wf__parallel_for of k runs fn on (fn's omp_get_thread_num() is below it): per-thread
 * scratch. */
int wf__intra_threads(const wf__kctx *k);

/* body(arg, t, T) on each thread t of an OpenMP team of at most `threads` (T of them ran), returning
 * when all are done. The caller holds the intra-op flag (wf__intra_begin) or is wf__parallel_for. The
 * hand-over to and from the team is stated to ThreadSanitizer (libgomp's own is invisible to it). */
typedef void (*wf__team_fn)(void *arg, int t, int T);
void wf__omp_team(int threads, wf__team_fn body, void *arg);

struct wf__kctx {
    const char *node;            /* node name, for messages */
    const wf__op_def *op;
    const wf__attr *attrs;
    int n_in;
    wf_tensor *const *in;        /* host tensors for the CPU device */
    int n_out;
    wf_tensor **out;             /* kernel fills each through wf__kctx_output / _forward */
    const wf__tinfo *out_info;   /* planned dtype and shape of each output (shape may be unknown) */
    uint32_t in_owned;           /* bit i: this node holds the last reference to in[i]'s producer slot */
    void **state;                /* per-plan-node kernel state; see wf__kernel_def.free_state */
    void *state_lock;            /* pass to wf__kctx_lock_state when initialising *state lazily */
    wf__intra *intra;            /* intra-op parallelism */
    /* Fused epilogue chosen by the lowering pass (MatMul/Conv/Gemm): bias input index or -1, and an
     * activation applied after it. */
    int fused_bias;              /* index into in[] of a 1-D bias over the last (MatMul) or channel dim */
    int fused_act;               /* WF__ACT_* */
    double fused_alpha;          /* LeakyRelu's slope, Swish's alpha */
    const struct wf__device *device; /* where outputs are allocated; NULL: host memory (the CPU) */
    struct wf__memacct *host_acct;   /* the CPU device's accounting of host outputs (core only; plugins
                                        never see host outputs) */
    const struct wf__kmem *mem;      /* the run's arena and the plan's slots (core only; NULL: none) */
    struct wf__weights *weights;     /* the session's device copies of constants (core only; NULL: none) */
    double est;                  /* the placer's estimate of this node's time, s; <= 0: none. Kernels
                                    estimated below WF__INTRA_MIN_EST run on one thread (intra.c) */
    /* Appended, after every field a plugin built earlier reads. Layout planning (optimisation level 3,
     * lower/layout.c): bit i of in_blocked, in[i] holds its 4-D value in the device's channel-blocked
     * layout (wf_backend_device_info.channel_block); bit 0 of out_blocked, out[0] is to be written in it. Only kernels registered with WF__K_BLOCKED see a bit
     * set on an input they interpret by position; elementwise kernels see the same elements either way. */
    uint32_t in_blocked, out_blocked;
    const wf__ew_program *ewprog; /* FusedElementwise's program (lower/jit.c); NULL for other nodes */
    /* Appended (core only): per output, a host tensor of the caller's to write it in (wf_run_options.into;
     * NULL: none), which wf__kctx_output hands out when the dtype and shape match. */
    wf_tensor *const *out_into;
    /* Appended (core only): the index into in[] of a residual added to the result before fused_act (a
     * Conv2D or MatMul + Add, ResNet's shortcut or a transformer's x + attention(x), lowered by
     * lower/plan.c; the output may be planned in its bytes), or 0 for none (input 0 is never one). */
    int fused_residual;
    /* Appended (core only): bit j set, nothing reads output j (the executor frees it unread), so a
     * kernel may leave that output's bytes unwritten (Attention's present key, value and scores behind
     * a fused attention, passes/attention.c). */
    uint32_t out_unused;
    /* Appended (core only): a fused activation's second parameter, Clip's lower bound (WF__ACT_CLIP;
     * fused_alpha holds its upper one); read with WF__ACT_CLIP only. */
    double fused_beta;
};

/* A device plugin's FusedElementwise node against its program (the inputs' dtypes and sizes, the planned
 * output's size): WF_OK with the output's element count in *n, or the code of the failure with its
 * message in msg, for the plugin's kctx_fail (which names the node). */
static inline wf_code wf__ew_check(const wf__kctx *k, int64_t *n, char *msg, size_t mn)
{
    const wf__ew_program *pg = k->ewprog;
    if (!pg || pg->n_in != k->n_in || pg->n_insn < 1 || pg->n_in > 2 * WF__EW_MAX_REGS) {
        snprintf(msg, mn, "FusedElementwise has no program for its %d inputs", k->n_in);
        return WF_INTERNAL;
    }
    const wf__tinfo *oi = &k->out_info[0];
    *n = 1;
    for (int d = 0; d < oi->rank; d++) *n *= oi->dims[d];
    if (oi->rank < 0 || *n != pg->n) {
        snprintf(msg, mn, "generated kernel: planned for %lld elements, output has %lld", (long long)pg->n,
                 (long long)*n);
        return WF_INTERNAL;
    }
    for (int i = 0; i < pg->n_in; i++) {
        const wf_tensor *t = k->in[i];
        int64_t want = wf__ew_kind(pg, i) == WF__EW_FULL ? pg->n : pg->in[i].period;
        if (!t || t->dtype != WF_F32 || t->size != want) {
            snprintf(msg, mn, "generated kernel: input %d does not have the %lld f32 elements it was built for", i,
                     (long long)want);
            return WF_INVALID_ARGUMENT;
        }
    }
    return WF_OK;
}

enum {
    WF__ACT_NONE = 0,
    WF__ACT_RELU = 1,
    WF__ACT_LEAKY_RELU = 2,
    WF__ACT_SIGMOID = 3,
    WF__ACT_TANH = 4,
    WF__ACT_SWISH = 5,    /* x * sigmoid(alpha x), alpha in fused_alpha */
    WF__ACT_HARDSWISH = 6, /* x * clamp(x / 6 + 1/2, 0, 1) */
    WF__ACT_GELU = 7,      /* 0.5 x (1 + erf(x / sqrt(2))), Gelu's exact form */
    WF__ACT_CLIP = 8,      /* Clip(x, lo, hi): hi in fused_alpha (Relu6: 6), lo in fused_beta, NaN kept, as the node */
    WF__ACT_GELU_TANH = 9  /* Gelu's tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
};

/* Allocates output idx with the given dtype and shape. */
wf_status *wf__kctx_output(wf__kctx *k, int idx, wf_dtype dtype, int rank, const int64_t *dims,
                           wf_tensor **out);
/* A WF_STRING output in host memory with `payload` bytes after its records (core.h,
 * wf__tensor_alloc_strings): never in an arena, counted against the CPU's memory limit. */
wf_status *wf__kctx_output_strings(wf__kctx *k, int idx, int rank, const int64_t *dims, size_t payload,
                                   wf_tensor **out);
/* Like wf__kctx_output, but reuses input in_idx's buffer when this node holds its last reference and
 * the byte size matches (elementwise ops that may run in place). *reused tells which happened. */
wf_status *wf__kctx_output_reuse(wf__kctx *k, int idx, int in_idx, wf_dtype dtype, int rank,
                                 const int64_t *dims, wf_tensor **out, bool *reused);
/* Output idx becomes a view of input in_idx with a new shape (same element count): Reshape, etc. */
wf_status *wf__kctx_output_view(wf__kctx *k, int idx, int in_idx, int rank, const int64_t *dims);
/* "node 'NAME' (OP): message" */
wf_status *wf__kctx_fail(const wf__kctx *k, wf_code code, const char *fmt, ...) WF__PRINTF(3, 4);
/* Serialises lazy initialisation of *k->state across concurrent runs of the same plan. */
void wf__kctx_lock_state(wf__kctx *k);
void wf__kctx_unlock_state(wf__kctx *k);
/* Number of intra-op threads this kernel may use (for libraries with their own threading). */
int wf__kctx_threads(const wf__kctx *k);
/* Brackets a call into a library that parallelises with OpenMP (oneDNN): sets the calling thread's
 * OpenMP thread count to what the intra-op pool allows right now and restores it afterwards, so
 * concurrent large kernels do not oversubscribe the cores. */
int wf__intra_begin(wf__kctx *k);
void wf__intra_end(wf__kctx *k, int token);
/* Brackets the creation of such a library's primitive: always the full intra-op thread count, since
 * oneDNN sizes per-thread scratch buffers at creation and must never execute with more threads than
 * that. Returns a token for wf__intra_end. */
int wf__intra_begin_create(wf__kctx *k);
/* Like wf__intra_begin for a primitive whose work split is fixed at creation for `threads` threads and
 * that synchronises them (oneDNN's backward-weights convolutions reduce across jcp.nthr threads at a
 * barrier, so run as thread 0 of 1 they wait forever): with threads > 1 it waits until no other kernel
 * of the context holds the cores and then opens exactly that many, busy machine or not. */
int wf__intra_begin_exact(wf__kctx *k, int threads);

typedef wf_status *(*wf__kernel_fn)(wf__kctx *k);

enum {
    WF__K_INPLACE = 1u << 0, /* the kernel may reuse input 0 (wf__kctx_output_reuse) or return a view of it */
    WF__K_EPILOGUE = 1u << 1, /* supports fused_bias / fused_act */
    WF__K_BLOCKED = 1u << 2,  /* reads input 0 and writes output 0 in the channel-blocked layout when
                                 wf__kctx.in_blocked / out_blocked say so */
    WF__K_CONST_VALUE = 1u << 3, /* a Const whose output 0 is a reference to its "value" attribute and
                                   nothing else: the plan binds it when a run starts, without running it */
    WF__K_PARTS_IN_PLACE = 1u << 4 /* a Concat that copies no input already at its place in the output:
                                      the memory plan may lay the inputs out there (lower/memplan.c) */
};

typedef struct wf__kernel_def {
    const char *op;
    const char *device_type;  /* "CPU" */
    uint32_t dtypes;          /* WF__DT_* mask over the key dtype */
    int key_input;            /* which input's dtype is the key; -1: output 0's dtype */
    wf__kernel_fn compute;
    void (*free_state)(void *state); /* optional */
    unsigned flags;
} wf__kernel_def;

/* Finds the kernel for op on device_type with key dtype; NULL if none. */
const wf__kernel_def *wf__kernel_lookup(const char *op, const char *device_type, wf_dtype key);
/* The kernel for a node: tries each registered def of op on device_type with its own key dtype. */
const wf__kernel_def *wf__kernel_find(const char *op, const char *device_type, const wf__tinfo *in,
                                      int n_in, const wf__tinfo *out);
/* Mask of dtypes op has kernels for on device_type (0 if none). */
uint32_t wf__kernel_dtypes(const char *op, const char *device_type);

/* CPU kernel tables, one per group file (terminated by op == NULL). */
extern const wf__kernel_def wf__cpu_kernels_core[];        /* src/backends/cpu/k_core.c */
extern const wf__kernel_def wf__cpu_kernels_image_io[];    /* k_image_io.c: ReadFile, DecodeJpeg, DecodePng */
extern const wf__kernel_def wf__cpu_kernels_image_augment[]; /* k_image_augment.c */
extern const wf__kernel_def wf__cpu_kernels_elementwise[]; /* k_elementwise.c */
extern const wf__kernel_def wf__cpu_kernels_shape[];       /* k_shape.c */
extern const wf__kernel_def wf__cpu_kernels_nn[];          /* k_dnnl.c */
extern const wf__kernel_def wf__cpu_kernels_reduce[];      /* k_reduce.c */
extern const wf__kernel_def wf__cpu_kernels_math[];        /* k_math.c */
extern const wf__kernel_def wf__cpu_kernels_misc[];        /* k_misc.c */
extern const wf__kernel_def wf__cpu_kernels_onnx[];        /* k_onnx.c */
extern const wf__kernel_def wf__cpu_kernels_rnn_image[];   /* k_rnn.c: RNNs, sampling, signal */
extern const wf__kernel_def wf__cpu_kernels_nn_grad[];     /* k_nn_grad.c: conv and pool backward */
extern const wf__kernel_def wf__cpu_kernels_train[];       /* k_train.c: ApplyAdam, StatelessRandomUniform */
extern const wf__kernel_def wf__cpu_kernels_fused[];       /* k_fused.c: FusedElementwise (lower/jit.c) */

#endif
