/*
 * Private glue between the CPU neural-network kernel files: k_dnnl.c (oneDNN engine, per-node primitive
 * cache, execution, the C epilogue, BiasAdd and the kernel table), k_dnnl_matmul.c (MatMul, Gemm),
 * k_dnnl_conv.c (Conv2D, ConvTranspose2D) and k_pool.c (the pools). Nothing here leaves the CPU backend.
 */
#ifndef WF_K_DNNL_H
#define WF_K_DNNL_H

#include "device/kernel.h"

#include <pthread.h>

#include <oneapi/dnnl/dnnl.h>

/* The window geometry of Conv2D, ConvTranspose2D and the pools (rules in ops/nn_window.h), resolved
 * through the op registry's attribute getter so inference and kernels agree on shapes and pads. */
#include "ops/nn_window.h"
int wf__nn_window_resolve(const wf__op_def *op, const wf__attr *attrs, int kind, const int64_t *in_hw,
                          const int64_t *wk, wf__nn_window *w, char *err, size_t en);

/* A cached oneDNN primitive, keyed by everything its creation depended on (shapes, dtypes, epilogue),
 * with the reorders that bring the user's plain tensors to the layouts the primitive chose. */
#define WF__DN_KEY_MAX 96
enum { WF__DN_SRC, WF__DN_WEI, WF__DN_BIAS, WF__DN_DST, WF__DN_WEI_PRIM, WF__DN_SRC_PRIM, WF__DN_DST_PRIM, WF__DN_NMD };
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
    /* Conv2D weight cache: the reordered weights with a copy of the plain weights they came from, so a run
     * with equal weights (a Const input) skips the reorder. wusers counts runs reading wcache; wlock
     * guards it and abuf/abusy below. */
    pthread_mutex_t wlock;
    bool wlock_init;
    void *wcache, *wsrc;
    int wusers;
    /* Conv2D: the blocked input and output of the last run, kept for the next one so a run does not pay
     * page faults on fresh buffers; abusy while a run uses it (a concurrent run allocates its own). */
    void *abuf;
    bool abusy;
} wf__dn_prim;
typedef wf_status *(*wf__dn_build_fn)(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p);

wf_status *wf__dn_fail(const wf__kctx *k, dnnl_status_t st, const char *what);
/* The node's cached primitive for key, built by build(arg) on a miss; release with wf__dn_release. */
wf_status *wf__dn_acquire(wf__kctx *k, const int64_t *key, int nkey, wf__dn_build_fn build, void *arg,
                          wf__dn_prim **out);
void wf__dn_release(wf__kctx *k, wf__dn_prim *p);
/* free_state of every kernel that caches a primitive */
void wf__dn_free_state(void *state);
/* Executes prim on n (arg id, descriptor, pointer) triples with a fresh user scratchpad of `scratch`'s
 * size, inside the intra-op gate. */
wf_status *wf__dn_exec(wf__kctx *k, dnnl_primitive_t prim, int n, const int *ids, const dnnl_memory_desc_t *const *mds,
                       void *const *ptrs, const dnnl_memory_desc_t *scratch);
/* Runs a reorder primitive from `from` to `to`. */
wf_status *wf__dn_reorder(wf__kctx *k, dnnl_primitive_t r, const dnnl_memory_desc_t *from, const void *src,
                          const dnnl_memory_desc_t *to, void *dst, const dnnl_memory_desc_t *scratch);
/* Creates a reorder primitive (user scratchpad) from one descriptor to another. */
dnnl_status_t wf__dn_reorder_create(dnnl_engine_t eng, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                    dnnl_primitive_t *out, dnnl_memory_desc_t *scratch);
/* A buffer of `bytes` for the blocked activations of one run: p's kept buffer when no other run holds it
 * (no page faults on a fresh one), else a private allocation. Return it with wf__dn_abuf_put. */
wf_status *wf__dn_abuf_get(wf__kctx *k, wf__dn_prim *p, size_t bytes, void **buf, bool *kept);
void wf__dn_abuf_put(wf__dn_prim *p, void *buf, bool kept);
/* Primitive attributes: user scratchpad and the activation act (WF__ACT_*) as a post-op where
 * wf__dn_act_in_prim(act, alpha); otherwise (relu, whose oneDNN JIT form drops NaN) the caller runs
 * wf__dn_relu_pass over the n elements of the primitive's output y (f32 or bf16) after it. */
dnnl_status_t wf__dn_attr(int act, double alpha, dnnl_primitive_attr_t *out);
bool wf__dn_act_in_prim(int act, double alpha);
void wf__dn_relu_pass(wf__kctx *k, void *y, dnnl_data_type_t dt, int64_t n, int act, double alpha);
dnnl_data_type_t wf__dn_dtype(wf_dtype t);

/* The C epilogue: y viewed as (outer, c, inner), plus bias over c (may be NULL), then the activation. */
void wf__dn_epilogue(void *y, wf_dtype t, int64_t outer, int64_t c, int64_t inner, const void *bias, int act,
                     double alpha);
float wf__dn_act_f(int act, float alpha, float v);
double wf__dn_act_d(int act, double alpha, double v);
/* An uninitialised f32 buffer of n elements, and one holding n elements of `from` converted to f32 (NULL p
 * gives NULL); free both with wf__aligned_free. */
wf_status *wf__dn_alloc_f32(wf__kctx *k, int64_t n, float **out);
wf_status *wf__dn_to_f32(wf__kctx *k, const void *p, wf_dtype from, int64_t n, float **out);
/* The fused bias input chosen by the lowering pass, or NULL. */
const wf_tensor *wf__dn_fused_bias(const wf__kctx *k);

wf_status *wf__dn_k_matmul(wf__kctx *k);
wf_status *wf__dn_k_gemm(wf__kctx *k);
wf_status *wf__dn_k_conv(wf__kctx *k);
wf_status *wf__dn_k_convt(wf__kctx *k);
wf_status *wf__dn_k_pool(wf__kctx *k);
wf_status *wf__dn_k_global_avg_pool(wf__kctx *k);

#endif
