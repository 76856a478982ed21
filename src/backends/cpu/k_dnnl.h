/*
 * Private glue between the CPU neural-network kernel files: k_dnnl.c (oneDNN engine, per-node primitive
 * cache, execution, the C epilogue, BiasAdd and the kernel table), k_dnnl_matmul.c (MatMul, Gemm),
 * k_dnnl_conv.c (Conv2D, ConvTranspose2D), k_pool.c (the pools) and k_rnn.c (RNN, GRU, LSTM). Nothing here
 * leaves the CPU backend.
 */
#ifndef WF_K_DNNL_H
#define WF_K_DNNL_H

#include "device/kernel.h"

#include <pthread.h>

#include <oneapi/dnnl/dnnl.h>

#include "k_dnnl_stats.h"
#include "k_tmp.h"

/* The window geometry of Conv2D, ConvTranspose2D and the pools (rules in ops/nn_window.h), resolved
 * through the op registry's attribute getter so inference and kernels agree on shapes and pads. */
#include "ops/nn_window.h"
int wf__nn_window_resolve(const wf__op_def *op, const wf__attr *attrs, int kind, const int64_t *in_hw,
                          const int64_t *wk, wf__nn_window *w, char *err, size_t en);

/* A cached oneDNN primitive, keyed by everything its creation depended on (shapes, dtypes, epilogue),
 * with the reorders that bring the user's plain tensors to the layouts the primitive chose. Everything
 * here is built once (wf__dn_acquire) and then only read, except the run contexts and the weight cache,
 * both under `lock`. */
#define WF__DN_KEY_MAX 96
enum { WF__DN_SRC, WF__DN_WEI, WF__DN_BIAS, WF__DN_DST, WF__DN_WEI_PRIM, WF__DN_SRC_PRIM, WF__DN_DST_PRIM, WF__DN_NMD };
/* Memory-object slots of a run context, one range per primitive a kernel executes (a range holds the
 * primitive's arguments, then its scratchpad). */
enum { WF__DN_SLOT_WREORDER = 0, WF__DN_SLOT_SREORDER = 3, WF__DN_SLOT_PRIM = 6, WF__DN_SLOT_DREORDER = 11,
       WF__DN_NSLOT = 20 };
/* The most arguments one execution takes (an LSTM's: three sources, four weights, three destinations). */
#define WF__DN_MAX_ARGS 12
enum { WF__DN_BUF_ACT, WF__DN_BUF_WEI, WF__DN_NBUF };
/* What one run of a primitive writes besides its output: oneDNN memory objects made once and re-pointed
 * with dnnl_memory_set_data_handle, one scratchpad buffer (the largest of the primitive's and its
 * reorders'; they execute one after another), and the blocked activations / privately reordered weights
 * of the run. A run takes one from the primitive's free list (or makes one when all are in use by
 * concurrent runs) and gives it back, so steady-state runs allocate nothing and create no objects. */
typedef struct wf__dn_run {
    struct wf__dn_run *next;
    dnnl_memory_t mem[WF__DN_NSLOT];
    void *mptr[WF__DN_NSLOT]; /* the handle mem[i] points at */
    void *sbuf;
    void *buf[WF__DN_NBUF];
    size_t buf_bytes[WF__DN_NBUF];
} wf__dn_run;
typedef struct wf__dn_prim {
    int64_t key[WF__DN_KEY_MAX];
    int nkey;
    int refs;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t md[WF__DN_NMD];
    dnnl_memory_desc_t scratch; /* scratchpad of prim (size 0: none) */
    /* Conv2D: user weights / source / destination to and from the primitive's layouts; NULL when equal */
    dnnl_primitive_t wreorder, sreorder, dreorder;
    dnnl_memory_desc_t wscratch, sscratch, dscratch;
    size_t scratch_max; /* bytes of a run context's scratchpad */
    int threads;        /* the OpenMP thread count it was created for */
    bool exact_threads; /* set by the build: it must execute on exactly `threads` (wf__intra_begin_exact) */
    size_t gpack;       /* MatMul through oneDNN's packed GEMM (k_dnnl_matmul.c): the packed B's bytes; 0: not.
                           Conv2D over a small map (k_conv_gemm.c): the packed weights' bytes */
    pthread_mutex_t lock; /* runs, and the weight cache */
    bool lock_init;
    wf__dn_run *runs; /* free run contexts */
    /* Conv2D weight cache: the weights in the primitive's layout, reordered from the input whose content
     * version (wf_tensor.version, never 0 here) is wver; wusers counts runs reading it. A run whose weights
     * carry another version repacks it when no run reads it, else reorders into its own run context. */
    void *wcache;
    uint64_t wver;
    int wusers;
    /* RNN, GRU, LSTM (k_rnn.c): the recurrent weights' reorder beside wreorder (the layer weights), the
     * descriptors beyond md[] (WF__DN_R*), and the versions of W, R, B, P the weight cache came from */
    dnnl_primitive_t ireorder;
    dnnl_memory_desc_t iscratch;
    dnnl_memory_desc_t rmd[4];
    uint64_t wvers[4];
} wf__dn_prim;
enum { WF__DN_RWI, WF__DN_RWI_PRIM, WF__DN_RSTATE, WF__DN_RPEEP };
typedef wf_status *(*wf__dn_build_fn)(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p);

/* Softmax of one row of n f32 values, x into y (in place allowed): the Softmax node's own loop
 * (k_norm.c), which the fused attention (k_onnx_attn.c) shares so both round alike. */
void wf__softmax_row_f32(const float *x, float *y, int64_t n);

wf_status *wf__dn_fail(const wf__kctx *k, dnnl_status_t st, const char *what);
/* The node's cached primitive for key, built by build(arg) on a miss; release with wf__dn_release. */
wf_status *wf__dn_acquire(wf__kctx *k, const int64_t *key, int nkey, wf__dn_build_fn build, void *arg,
                          wf__dn_prim **out);
void wf__dn_release(wf__kctx *k, wf__dn_prim *p);
/* free_state of every kernel that caches a primitive */
void wf__dn_free_state(void *state);
/* A run context of p (see wf__dn_run); give it back with wf__dn_run_put before releasing p. */
wf_status *wf__dn_run_get(wf__kctx *k, wf__dn_prim *p, wf__dn_run **out);
void wf__dn_run_put(wf__dn_prim *p, wf__dn_run *r);
/* The run context's buffer `which` (WF__DN_BUF_*) of `bytes`, allocated by its first use. */
wf_status *wf__dn_run_buf(wf__kctx *k, wf__dn_run *r, int which, size_t bytes, void **out);
/* Executes prim on n (arg id, descriptor, pointer) triples through r's memory objects slot..slot+n-1
 * (slot+n: the scratchpad of `scratch`'s size, in r's scratch buffer), on the calling thread's stream,
 * inside the intra-op gate. A slot must always see the same descriptor. */
wf_status *wf__dn_exec(wf__kctx *k, wf__dn_run *r, int slot, dnnl_primitive_t prim, int n, const int *ids,
                       const dnnl_memory_desc_t *const *mds, void *const *ptrs, const dnnl_memory_desc_t *scratch);
/* wf__dn_exec of p->prim, on exactly the threads it was built for when p->exact_threads. */
wf_status *wf__dn_exec_prim(wf__kctx *k, wf__dn_run *r, int slot, const wf__dn_prim *p, int n, const int *ids,
                            const dnnl_memory_desc_t *const *mds, void *const *ptrs);
/* Runs a reorder primitive from `from` to `to` through slots slot..slot+2. */
wf_status *wf__dn_reorder(wf__kctx *k, wf__dn_run *r, int slot, dnnl_primitive_t prim, const dnnl_memory_desc_t *from,
                          const void *src, const dnnl_memory_desc_t *to, void *dst, const dnnl_memory_desc_t *scratch);
/* Counts a Conv2D weight reorder (wf__dn_stats.wpacks). */
void wf__dn_count_wpack(void);
/* Whether two blocked descriptors of the same dims put every element at the same offset, without padding
 * (an [N, C, 1, 1] activation is the same bytes plain and in whole channel blocks); small tensors only. */
bool wf__dn_same_bytes(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b);
/* Creates a reorder primitive (user scratchpad) from one descriptor to another. */
dnnl_status_t wf__dn_reorder_create(dnnl_engine_t eng, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                    dnnl_primitive_t *out, dnnl_memory_desc_t *scratch);
/* The same, adding the reordered values to what `to` holds when sum. */
dnnl_status_t wf__dn_reorder_create_sum(dnnl_engine_t eng, const dnnl_memory_desc_t *from,
                                        const dnnl_memory_desc_t *to, bool sum, dnnl_primitive_t *out,
                                        dnnl_memory_desc_t *scratch);
/* Primitive attributes: user scratchpad and the activation act (WF__ACT_*) as a post-op where
 * wf__dn_act_in_prim(act, alpha); otherwise (relu, whose oneDNN JIT form drops NaN) the caller runs
 * wf__dn_relu_pass over the n elements of the primitive's output y (f32 or bf16) after it. */
dnnl_status_t wf__dn_attr(int act, double alpha, dnnl_primitive_attr_t *out);
/* The same, with a sum post-op first when sum: the result is added to what dst holds (a fused residual,
 * k_dnnl_conv.c). */
dnnl_status_t wf__dn_attr_sum(int act, double alpha, bool sum, dnnl_primitive_attr_t *out);
bool wf__dn_act_in_prim(int act, double alpha);
void wf__dn_relu_pass(wf__kctx *k, void *y, dnnl_data_type_t dt, int64_t n, int act, double alpha, double beta);
/* After weft's own convolution kernels (Winograd, the small maps' GEMM), which apply a Relu themselves: any
 * other fused activation over the n f32 values of y, as the direct path has it (oneDNN's post-ops there,
 * wf__dn_relu_pass's forms or the scalar epilogue here). */
void wf__dn_conv_act_after(wf__kctx *k, float *y, int64_t n, int act, double alpha, double beta);
dnnl_data_type_t wf__dn_dtype(wf_dtype t);

/* The C epilogue: y viewed as (outer, c, inner), plus bias over c (may be NULL), then the activation.
 * An activation's parameters are wf__kctx's fused_alpha and fused_beta (Clip's upper and lower bounds). */
void wf__dn_epilogue(void *y, wf_dtype t, int64_t outer, int64_t c, int64_t inner, const void *bias, int act,
                     double alpha, double beta);
float wf__dn_act_f(int act, float alpha, float beta, float v);
double wf__dn_act_d(int act, double alpha, double beta, double v);
/* The weights w (p->md[WF__DN_WEI]) in the primitive's layout (p->md[WF__DN_WEI_PRIM]) through
 * p->wreorder: reordered once per content version wver into p's cache (0: unstamped, into the run's own
 * buffer every run). With *cached set the caller calls wf__dn_weights_done once the primitive ran. */
wf_status *wf__dn_weights(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, const void *w, uint64_t wver, void **wbuf,
                          bool *cached);
void wf__dn_weights_done(wf__dn_prim *p, bool cached);
/* The same cache for weights a kernel packs itself: pack(k, arg, dst) writes the `bytes` of the packed
 * form into dst (once per version wver into p's cache, else into the run's own buffer). */
typedef wf_status *(*wf__dn_pack_fn)(wf__kctx *k, void *arg, void *dst);
wf_status *wf__dn_weights_with(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, uint64_t wver, size_t bytes,
                               wf__dn_pack_fn pack, void *arg, void **wbuf, bool *cached);

/* Winograd F(2x2, 3x3) (k_conv_wino.c): a 3x3 stride-1 f32 convolution of x [n, c, h, w] into y [n, oc, oh,
 * ow], both in level 3's channel-blocked layout, padding pt (top) and pl (left). */
typedef struct wf__wino_geom {
    int64_t n, c, h, w, oc, oh, ow, pt, pl;
} wf__wino_geom;
/* Whether the convolution is one it takes (and WEFT_CPU_WINOGRAD is not 0). */
bool wf__wino_takes(const wf__kctx *k, const wf__wino_geom *g, int64_t groups, int64_t kh, int64_t kw,
                    const wf__nn_window *wn);
/* y = conv(x, w) + bias (may be NULL), + what y holds when sum, then act. *done false (and nothing written)
 * when a value of x or w is not finite: the caller then runs the direct kernel. */
wf_status *wf__wino_conv(wf__kctx *k, const wf__wino_geom *g, const float *x, const float *w, uint64_t wver,
                         const float *bias, float *y, bool sum, int act, double alpha, double beta, bool *done);
/* Convolutions the Winograd kernel ran, and in *f4 those of them as F(4x4, 3x3) (process-wide, monotonic;
 * wf__dn_stats.wino, wino4). */
int64_t wf__wino_runs(int64_t *f4);
/* MatMuls run through oneDNN's packed GEMM (k_dnnl_matmul.c), and whether this libdnnl has its entry points. */
int64_t wf__mm_gpack_runs(void);
int64_t wf__mm_small_runs(void); /* f32 MatMuls and Gemms run as the small plain loop (k_dnnl_matmul.c) */
int64_t wf__conv_gemv_runs(void);
int64_t wf__conv_sub_runs(void);
bool wf__mm_gpack_linked(void);
/* The 16-bit float dtypes this CPU computes natively through oneDNN (bit 1u << WF_BF16 or 0), with the
 * reason in note (wf_backend_device_info.fast_dtypes and precision_note). */
uint32_t wf__dn_fast_dtypes(char *note, size_t cap);
/* Convolutions over small output maps as one packed GEMM (k_conv_gemm.c): f32, ungrouped, x [n, c, h, w]
 * and y [n, oc, oh, ow] each plain or channel-blocked as k->in_blocked / out_blocked say. */
typedef struct wf__conv_gemm_geom {
    int64_t n, c, h, w, oc, oh, ow, kh, kw;
    wf__nn_window win;
} wf__conv_gemm_geom;
/* Whether the convolution is one it takes (and WEFT_CPU_CONV_GEMM is not 0). */
bool wf__conv_gemm_takes(const wf__kctx *k, const wf__conv_gemm_geom *g);
/* y = conv(x, w) + bias (may be NULL), + what y holds when sum, then act. *done false (and nothing written)
 * when a weight is not finite: the caller then runs the direct kernel. */
wf_status *wf__conv_gemm(wf__kctx *k, const wf__conv_gemm_geom *g, const float *x, const float *w, uint64_t wver,
                         const float *bias, float *y, bool sum, int act, bool *done);
int64_t wf__conv_gemm_runs(void);
/* oneDNN's packed sgemm for a constant left operand (k_dnnl_matmul.c): w row-major [m][k] packed once,
 * then C (column-major [m x n], ldc m) = w B (B column-major [k x n], ldb k). wf__sgemm_w_bytes is 0 where
 * this libdnnl lacks the entry points or refuses the shape; the others return oneDNN's status. */
size_t wf__sgemm_w_bytes(int64_t m, int64_t n, int64_t k);
int wf__sgemm_w_pack(int64_t m, int64_t n, int64_t k, const float *w, void *dst);
int wf__sgemm_w_compute(int64_t m, int64_t n, int64_t k, const void *packed, const float *b, float *c);

/* The 4-D tag of wf__dn_channel_block's layout (k_dnnl_stats.h): nChw16c, nChw8c or nhwc. */
dnnl_format_tag_t wf__dn_blocked_tag(void);
/* The fused bias input chosen by the lowering pass, or NULL. */
const wf_tensor *wf__dn_fused_bias(const wf__kctx *k);

/* k_rnn.c's cache of packed recurrent weights, keyed by the content versions of t[0..3] (W, R, B, P; NULL
 * for an absent one): pack(arg, their data, buf) fills `bytes` once per set of versions, or a run's own
 * buffer while another run reads a stale cache. *cached: call wf__rnn_weights_done after use. */
typedef wf_status *(*wf__rnn_pack_fn)(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, const void *arg,
                                      const float *const w[4], char *buf);
wf_status *wf__rnn_weights(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, const wf_tensor *const *t, size_t bytes,
                           wf__rnn_pack_fn pack, const void *arg, char **out, bool *cached);
void wf__rnn_weights_done(wf__dn_prim *p, bool cached);
/* k_rnn_lstm.c: weft's own f32 LSTM, for what k_rnn.c's oneDNN path also takes (default activations, no
 * clip, input_forget or shorter sequences, f32, no empty dimension) when wf__lstm_own_takes the shape. */
typedef struct wf__lstm_dims {
    int64_t seq, batch, in, hs, nd;
    int layout;
    bool reverse; /* the one direction runs backwards */
} wf__lstm_dims;
bool wf__lstm_own_takes(const wf__lstm_dims *d);
wf_status *wf__lstm_own(wf__kctx *k, const wf__lstm_dims *d);
/* its counts for wf__dn_stats: runs, and runs on several threads splitting the rows or the chunks */
void wf__lstm_stats(int64_t *runs, int64_t *rows, int64_t *chunks, int64_t *steals);

wf_status *wf__dn_k_matmul(wf__kctx *k);
wf_status *wf__dn_k_gemm(wf__kctx *k);
wf_status *wf__dn_k_conv(wf__kctx *k);
wf_status *wf__dn_k_convt(wf__kctx *k);
wf_status *wf__dn_k_pool(wf__kctx *k);
wf_status *wf__dn_k_global_avg_pool(wf__kctx *k);

#endif
