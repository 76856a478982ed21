/*
 * Shared oneDNN plumbing of the CPU neural-network kernels (one engine, a stream per thread, the per-node
 * primitive cache with its run contexts, execution with user scratchpads, reorders), the C epilogue of the fallback paths, BiasAdd, and the
 * kernel table. The kernels live in k_dnnl_matmul.c, k_dnnl_conv.c and k_pool.c (see k_dnnl.h).
 */
#include "k_dnnl.h"
#include "k_elementwise.h"

#include <cpuid.h>

#include <omp.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <oneapi/dnnl/dnnl_debug.h>

/* lets the epilogue passes' selects vectorise (leaky relu, HardSwish's clamp), as in k_elementwise.c */
#pragma GCC optimize("no-trapping-math")

/* ---- shared oneDNN plumbing ---------------------------------------------------------------------- */

/* One engine for the process: oneDNN engines are thread-safe, streams are not, so each thread that
 * executes gets its own stream, made by its first execution and destroyed when the thread exits. */
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine;
static dnnl_status_t g_engine_status;
static pthread_key_t g_stream_key;
static int g_stream_key_rc;

static atomic_int_least64_t g_prims, g_runs, g_mems, g_streams, g_wpacks;

void wf__dn_stats_get(wf__dn_stats *out)
{
    out->prims = atomic_load(&g_prims);
    out->runs = atomic_load(&g_runs);
    out->mems = atomic_load(&g_mems);
    out->streams = atomic_load(&g_streams);
    out->wpacks = atomic_load(&g_wpacks);
    wf__lstm_stats(&out->lstm_own, &out->lstm_rows, &out->lstm_chunks, &out->lstm_steals);
    out->wino = wf__wino_runs(&out->wino4);
    out->gpack = wf__mm_gpack_runs();
    out->conv_gemv = wf__conv_gemv_runs();
    out->conv_sub = wf__conv_sub_runs();
    out->mm_small = wf__mm_small_runs();
    out->conv_gemm = wf__conv_gemm_runs();
}

void wf__dn_count_wpack(void) { atomic_fetch_add(&g_wpacks, 1); }

static void stream_destroy(void *st) { dnnl_stream_destroy(st); }

static void engine_init(void)
{
    g_engine_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0);
    g_stream_key_rc = pthread_key_create(&g_stream_key, stream_destroy);
}

wf_status *wf__dn_fail(const wf__kctx *k, dnnl_status_t st, const char *what)
{
    wf_code code = st == dnnl_out_of_memory ? WF_OUT_OF_MEMORY
                   : st == dnnl_unimplemented ? WF_UNIMPLEMENTED
                   : st == dnnl_invalid_arguments ? WF_INVALID_ARGUMENT : WF_INTERNAL;
    return wf__kctx_fail(k, code, "oneDNN %s failed: %s", what, dnnl_status2str(st));
}

static wf_status *dn_engine(const wf__kctx *k, dnnl_engine_t *out)
{
    pthread_once(&g_engine_once, engine_init);
    if (g_engine_status != dnnl_success) return wf__dn_fail(k, g_engine_status, "CPU engine creation");
    if (g_stream_key_rc) return wf__kctx_fail(k, WF_INTERNAL, "cannot create the thread key of oneDNN streams");
    *out = g_engine;
    return NULL;
}

/* The calling thread's stream (the engine exists: dn_engine succeeded). */
static wf_status *dn_stream(const wf__kctx *k, dnnl_stream_t *out)
{
    dnnl_stream_t st = pthread_getspecific(g_stream_key);
    if (!st) {
        dnnl_status_t rc = dnnl_stream_create(&st, g_engine, dnnl_stream_default_flags);
        if (rc != dnnl_success) return wf__dn_fail(k, rc, "stream creation");
        if (pthread_setspecific(g_stream_key, st)) {
            dnnl_stream_destroy(st);
            return wf__kctx_fail(k, WF_INTERNAL, "cannot keep the thread's oneDNN stream");
        }
        atomic_fetch_add(&g_streams, 1);
    }
    *out = st;
    return NULL;
}

static void dn_run_destroy(wf__dn_run *r)
{
    for (int i = 0; i < WF__DN_NSLOT; i++)
        if (r->mem[i]) dnnl_memory_destroy(r->mem[i]);
    wf__aligned_free(r->sbuf);
    for (int i = 0; i < WF__DN_NBUF; i++) wf__aligned_free(r->buf[i]);
    wf__free(r);
}

static void dn_prim_destroy(wf__dn_prim *p)
{
    if (!p) return;
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->wreorder) dnnl_primitive_destroy(p->wreorder);
    if (p->sreorder) dnnl_primitive_destroy(p->sreorder);
    if (p->dreorder) dnnl_primitive_destroy(p->dreorder);
    if (p->ireorder) dnnl_primitive_destroy(p->ireorder);
    if (p->lock_init) pthread_mutex_destroy(&p->lock);
    while (p->runs) {
        wf__dn_run *r = p->runs;
        p->runs = r->next;
        dn_run_destroy(r);
    }
    wf__aligned_free(p->wcache);
    wf__free(p);
}

/* The node's state holds one reference to the current primitive and each run in flight another, so a
 * shape change can replace the primitive while an older run still executes the previous one. */
void wf__dn_free_state(void *state)
{
    wf__dn_prim *p = state;
    if (p && --p->refs == 0) dn_prim_destroy(p);
}

static pthread_mutex_t g_build_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t size_max(size_t a, size_t b) { return a > b ? a : b; }

wf_status *wf__dn_acquire(wf__kctx *k, const int64_t *key, int nkey, wf__dn_build_fn build, void *arg,
                          wf__dn_prim **out)
{
    dnnl_engine_t eng = NULL;
    WF__TRY(dn_engine(k, &eng));
    if (nkey > WF__DN_KEY_MAX) return wf__kctx_fail(k, WF_INTERNAL, "primitive key too long (%d)", nkey);
    bool cached = k->state != NULL;
    if (cached) wf__kctx_lock_state(k);
    wf__dn_prim *cur = cached ? *k->state : NULL;
    if (cur && cur->nkey == nkey && !memcmp(cur->key, key, sizeof(int64_t) * (size_t)nkey)) {
        cur->refs++;
        wf__kctx_unlock_state(k);
        *out = cur;
        return NULL;
    }
    wf_status *s = NULL;
    wf__dn_prim *p = wf__calloc(1, sizeof *p);
    if (!p) {
        s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for a primitive cache entry",
                          sizeof *p);
        goto done;
    }
    p->nkey = nkey;
    if (pthread_mutex_init(&p->lock, NULL)) {
        s = wf__kctx_fail(k, WF_INTERNAL, "cannot initialise the lock of a primitive cache entry");
        wf__free(p);
        goto done;
    }
    p->lock_init = true;
    memcpy(p->key, key, sizeof(int64_t) * (size_t)nkey);
    /* oneDNN picks its implementation and sizes its scratchpad for the thread count in effect at
     * creation; execution may use fewer threads (the intra-op gate) but never more. */
    int tok = wf__intra_begin_create(k);
    p->threads = omp_get_max_threads();
    /* One build at a time in the process: oneDNN's primitive cache shares primitive descriptors between
     * threads, synchronised inside libdnnl where ThreadSanitizer cannot see it (two convolutions built at
     * once on two inter-op threads were reported as a race on a cached descriptor). A build happens once
     * per node and shape, so the lock costs nothing in steady state, and identical primitives wanted by
     * two threads are JIT-compiled once instead of twice. */
    pthread_mutex_lock(&g_build_mu);
    s = build(k, arg, eng, p);
    pthread_mutex_unlock(&g_build_mu);
    wf__intra_end(k, tok);
    if (s) {
        dn_prim_destroy(p);
        goto done;
    }
    atomic_fetch_add(&g_prims, 1);
    p->scratch_max = size_max(size_max(dnnl_memory_desc_get_size(&p->scratch), dnnl_memory_desc_get_size(&p->wscratch)),
                              size_max(dnnl_memory_desc_get_size(&p->sscratch), dnnl_memory_desc_get_size(&p->dscratch)));
    p->scratch_max = size_max(p->scratch_max, dnnl_memory_desc_get_size(&p->iscratch));
    if (cached) {
        p->refs = 2;
        if (cur && --cur->refs == 0) dn_prim_destroy(cur);
        *k->state = p;
    } else {
        p->refs = 1;
    }
    *out = p;
done:
    if (cached) wf__kctx_unlock_state(k);
    return s;
}

void wf__dn_release(wf__kctx *k, wf__dn_prim *p)
{
    if (!p) return;
    if (k->state) wf__kctx_lock_state(k);
    bool last = --p->refs == 0;
    if (k->state) wf__kctx_unlock_state(k);
    if (last) dn_prim_destroy(p);
}

wf_status *wf__dn_run_get(wf__kctx *k, wf__dn_prim *p, wf__dn_run **out)
{
    pthread_mutex_lock(&p->lock);
    wf__dn_run *r = p->runs;
    if (r) p->runs = r->next;
    pthread_mutex_unlock(&p->lock);
    if (!r) {
        if (!(r = wf__calloc(1, sizeof *r)))
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for a oneDNN run context",
                                 sizeof *r);
        if (p->scratch_max && !(r->sbuf = wf__aligned_alloc(p->scratch_max, WF__ALIGN))) {
            wf__free(r);
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY,
                                 "out of memory allocating %zu bytes of oneDNN scratchpad on CPU:0", p->scratch_max);
        }
        atomic_fetch_add(&g_runs, 1);
    }
    r->next = NULL;
    *out = r;
    return NULL;
}

void wf__dn_run_put(wf__dn_prim *p, wf__dn_run *r)
{
    if (!r) return;
    pthread_mutex_lock(&p->lock);
    r->next = p->runs;
    p->runs = r;
    pthread_mutex_unlock(&p->lock);
}

wf_status *wf__dn_run_buf(wf__kctx *k, wf__dn_run *r, int which, size_t bytes, void **out)
{
    if (!bytes) bytes = 1;
    if (!r->buf[which] || r->buf_bytes[which] < bytes) {
        wf__aligned_free(r->buf[which]);
        r->buf_bytes[which] = 0;
        if (!(r->buf[which] = wf__aligned_alloc(bytes, WF__ALIGN)))
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s on CPU:0", bytes,
                                 which == WF__DN_BUF_ACT ? "blocked activations" : "reordered weights");
        r->buf_bytes[which] = bytes;
    }
    *out = r->buf[which];
    return NULL;
}

/* r's memory object in `slot`, described by md and pointing at ptr: made by the first use, re-pointed
 * when the pointer changed. */
static wf_status *dn_mem(wf__kctx *k, wf__dn_run *r, int slot, const dnnl_memory_desc_t *md, void *ptr)
{
    dnnl_status_t st;
    if (!r->mem[slot]) {
        if ((st = dnnl_memory_create(&r->mem[slot], md, g_engine, ptr)) != dnnl_success) {
            r->mem[slot] = NULL;
            return wf__dn_fail(k, st, "memory creation");
        }
        atomic_fetch_add(&g_mems, 1);
    } else if (r->mptr[slot] != ptr) {
        if ((st = dnnl_memory_set_data_handle(r->mem[slot], ptr)) != dnnl_success)
            return wf__dn_fail(k, st, "memory handle update");
    }
    r->mptr[slot] = ptr;
    return NULL;
}

static wf_status *dn_exec(wf__kctx *k, wf__dn_run *r, int slot, dnnl_primitive_t prim, int n, const int *ids,
                          const dnnl_memory_desc_t *const *mds, void *const *ptrs, const dnnl_memory_desc_t *scratch,
                          int exact_threads)
{
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    WF__TRY(dn_engine(k, &eng));
    WF__TRY(dn_stream(k, &stream));
    dnnl_exec_arg_t args[WF__DN_MAX_ARGS + 1];
    if (n > WF__DN_MAX_ARGS || slot + n >= WF__DN_NSLOT)
        return wf__kctx_fail(k, WF_INTERNAL, "oneDNN execution with %d arguments at slot %d", n, slot);
    size_t sbytes = scratch ? dnnl_memory_desc_get_size(scratch) : 0;
    for (int i = 0; i < n; i++) {
        WF__TRY(dn_mem(k, r, slot + i, mds[i], ptrs[i]));
        args[i].arg = ids[i];
        args[i].memory = r->mem[slot + i];
    }
    if (sbytes) {
        WF__TRY(dn_mem(k, r, slot + n, scratch, r->sbuf));
        args[n].arg = DNNL_ARG_SCRATCHPAD;
        args[n].memory = r->mem[slot + n];
    }
    int tok = exact_threads ? wf__intra_begin_exact(k, exact_threads) : wf__intra_begin(k);
    dnnl_status_t st = dnnl_primitive_execute(prim, stream, n + (sbytes != 0), args);
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    wf__intra_end(k, tok);
    return st != dnnl_success ? wf__dn_fail(k, st, "execution") : NULL;
}

wf_status *wf__dn_exec(wf__kctx *k, wf__dn_run *r, int slot, dnnl_primitive_t prim, int n, const int *ids,
                       const dnnl_memory_desc_t *const *mds, void *const *ptrs, const dnnl_memory_desc_t *scratch)
{
    return dn_exec(k, r, slot, prim, n, ids, mds, ptrs, scratch, 0);
}

wf_status *wf__dn_exec_prim(wf__kctx *k, wf__dn_run *r, int slot, const wf__dn_prim *p, int n, const int *ids,
                            const dnnl_memory_desc_t *const *mds, void *const *ptrs)
{
    return dn_exec(k, r, slot, p->prim, n, ids, mds, ptrs, &p->scratch, p->exact_threads ? p->threads : 0);
}

wf_status *wf__dn_reorder(wf__kctx *k, wf__dn_run *r, int slot, dnnl_primitive_t prim, const dnnl_memory_desc_t *from,
                          const void *src, const dnnl_memory_desc_t *to, void *dst, const dnnl_memory_desc_t *scratch)
{
    int ids[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    const dnnl_memory_desc_t *mds[2] = {from, to};
    void *ptrs[2] = {(void *)src, dst};
    return wf__dn_exec(k, r, slot, prim, 2, ids, mds, ptrs, scratch);
}

dnnl_status_t wf__dn_reorder_create(dnnl_engine_t eng, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                    dnnl_primitive_t *out, dnnl_memory_desc_t *scratch)
{
    return wf__dn_reorder_create_sum(eng, from, to, false, out, scratch);
}

/* Whether md is a blocked layout whose blocks pad a dimension (ShuffleNetV2's 58 and 116 channels in
 * blocks of 8). */
/* The byte offset of logical element idx in a blocked descriptor: the outer index of each dim (its
 * index over the product of its inner blocks) times its stride, then the inner blocks in order, the
 * last one innermost. */
static int64_t md_offset(const dnnl_memory_desc_t *md, const int64_t *idx)
{
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int64_t blk[DNNL_MAX_NDIMS], rem[DNNL_MAX_NDIMS], off = md->offset0, inner = 0, step = 1;
    for (int d = 0; d < md->ndims; d++) blk[d] = 1;
    for (int i = 0; i < b->inner_nblks; i++) blk[b->inner_idxs[i]] *= b->inner_blks[i];
    for (int d = 0; d < md->ndims; d++) {
        off += idx[d] / blk[d] * b->strides[d];
        rem[d] = idx[d] % blk[d];
    }
    for (int i = b->inner_nblks - 1; i >= 0; i--) {
        int d = b->inner_idxs[i];
        inner += rem[d] % b->inner_blks[i] * step;
        rem[d] /= b->inner_blks[i];
        step *= b->inner_blks[i];
    }
    return off + inner;
}

bool wf__dn_same_bytes(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b)
{
    if (a->format_kind != dnnl_blocked || b->format_kind != dnnl_blocked || a->ndims != b->ndims ||
        a->data_type != b->data_type || a->ndims < 1 || a->ndims > DNNL_MAX_NDIMS)
        return false;
    int64_t n = 1;
    for (int d = 0; d < a->ndims; d++) {
        if (a->dims[d] != b->dims[d] || a->padded_dims[d] != a->dims[d] || b->padded_dims[d] != b->dims[d]) return false;
        n *= a->dims[d];
    }
    if (n > 65536) return false; /* not worth the walk: such pairs are not the same bytes in practice */
    int64_t idx[DNNL_MAX_NDIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        if (md_offset(a, idx) != md_offset(b, idx)) return false;
        for (int d = a->ndims - 1; d >= 0 && ++idx[d] == a->dims[d]; d--) idx[d] = 0;
    }
    return true;
}

static bool dn_padded(const dnnl_memory_desc_t *md)
{
    if (md->format_kind != dnnl_blocked || md->format_desc.blocking.inner_nblks == 0) return false;
    for (int i = 0; i < md->ndims; i++)
        if (md->padded_dims[i] != md->dims[i]) return true;
    return false;
}

/*
 * A reorder into a padded blocked layout is made for the calling thread alone: oneDNN 2.6's jit:uni
 * reorder splits it among threads so badly that two threads take twice as long as one (Zen 3, P10 of 200
 * runs, plain NCHW to nChw8c: 58x28x28 10.1 us on one thread against 22.7 on two; 58x56x56 38.7 against
 * 87.5; 116x14x14 5.0 against 8.2; 116x28x28 35.4 against 42.0), while whole blocks (64x56x56 33.1 against
 * 19.9) and the way back out of padded blocks (58x56x56 134 against 55) gain from the second thread.
 */
dnnl_status_t wf__dn_reorder_create_sum(dnnl_engine_t eng, const dnnl_memory_desc_t *from,
                                        const dnnl_memory_desc_t *to, bool sum, dnnl_primitive_t *out,
                                        dnnl_memory_desc_t *scratch)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    /* a reorder fixes its thread count when it is created (whatever the count is when it runs) */
    int threads = dn_padded(to) && !dn_padded(from) ? omp_get_max_threads() : 1;
    if (threads > 1) omp_set_num_threads(1);
    /* reorders get the user scratchpad too, but never an activation */
    dnnl_status_t st = wf__dn_attr_sum(WF__ACT_NONE, 0, sum, &attr);
    if (st == dnnl_success) st = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, attr);
    if (st == dnnl_success) {
        *scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        st = dnnl_primitive_create(out, pd);
    }
    if (threads > 1) omp_set_num_threads(threads);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* Whether oneDNN applies act as a post-op. Plain relu is the exception: oneDNN's JIT relu with alpha 0
 * (and clip) is vmaxps(x, 0), which returns 0 for a NaN x, so NaN would vanish in a fused kernel
 * (numpy, PyTorch and weft's own Relu keep it). The NaN-keeping relu runs instead as a pass over the
 * just-written output (wf__dn_relu_pass); leaky relu (a compare and blend), logistic and tanh keep NaN
 * in oneDNN 2.6 and stay post-ops, except leaky relu with alpha 0, which oneDNN runs as plain relu.
 * test_session's fusion_nan checks every one of them. */
bool wf__dn_act_in_prim(int act, double alpha)
{
    /* swish and hardswish: oneDNN 2.6 runs them slowly as convolution post-ops (EfficientNet-B0 102-108 ms
     * against 25 ms), so they too are a pass of weft's own, the Swish and HardSwish nodes' code, in place
     * over the output while it is in cache; so is Gelu (the Gelu node's loop and erf, which oneDNN's
     * gelu_erf post-op would not match bit for bit) */
    return act != WF__ACT_RELU && !(act == WF__ACT_LEAKY_RELU && alpha == 0) && act != WF__ACT_SWISH &&
           act != WF__ACT_HARDSWISH && act != WF__ACT_GELU && act != WF__ACT_CLIP && act != WF__ACT_GELU_TANH;
}

typedef struct relu_pass_arg {
    void *y;
    bool bf16, leaky;
    float alpha, beta;
    int act;
} relu_pass_arg;

/* x < 0 ? 0 : x keeps NaN (the compare is false) and vectorises to a compare and an and-not; leaky relu
 * (alpha 0 here) is x < 0 ? x * alpha : x, so -inf * 0 is NaN as in numpy and weft's own LeakyRelu. */
WF__VEC static void relu_pass_range(void *arg, int64_t i0, int64_t i1)
{
    const relu_pass_arg *r = arg;
    if (r->act == WF__ACT_SWISH || r->act == WF__ACT_HARDSWISH || r->act == WF__ACT_GELU || r->act == WF__ACT_CLIP ||
        r->act == WF__ACT_GELU_TANH) {
        if (r->bf16) { /* lowering fuses these in f32 only; kept correct for a caller that does not */
            uint16_t *p = r->y;
            for (int64_t i = i0; i < i1; i++) p[i] = wf__f2bf(wf__dn_act_f(r->act, r->alpha, r->beta, wf__bf2f(p[i])));
        } else if (r->act == WF__ACT_SWISH) {
            wf__ew_swish_f32((float *)r->y + i0, (float *)r->y + i0, i1 - i0, r->alpha);
        } else if (r->act == WF__ACT_GELU) {
            wf__ew_gelu_f32((float *)r->y + i0, (float *)r->y + i0, i1 - i0);
        } else if (r->act == WF__ACT_GELU_TANH) {
            wf__ew_gelu_tanh_f32((float *)r->y + i0, (float *)r->y + i0, i1 - i0);
        } else if (r->act == WF__ACT_CLIP) {
            /* the Clip node's expression: NaN passes both compares, and -0 a lower bound of 0 */
            float *p = r->y, lo = r->beta, hi = r->alpha;
            _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {
                float v = p[i] < lo ? lo : p[i];
                p[i] = v > hi ? hi : v;
            }
        } else {
            /* HardSwish as wf__dn_act_f and the HardSwish node: x * clamp(x / 6 + 1/2, 0, 1), NaN kept */
            wf__ew_hardswish_f32((float *)r->y + i0, i1 - i0);
        }
        return;
    }
    if (r->bf16 && r->leaky) {
        uint16_t *p = r->y;
        for (int64_t i = i0; i < i1; i++) {
            float v = wf__bf2f(p[i]);
            if (v < 0) p[i] = wf__f2bf(v * r->alpha);
        }
    } else if (r->bf16) {
        /* zero where negative and not NaN (-inf included), with a mask so that it vectorises: a branch per
         * element had made the fused bf16 Conv+Relu of ResNet-50 slower than a Relu node of its own */
        uint16_t *p = r->y;
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {
            uint16_t v = p[i];
            uint16_t neg = (uint16_t)((v >> 15) & ((v & 0x7fff) <= 0x7f80));
            p[i] = (uint16_t)(v & (uint16_t)(neg - 1));
        }
    } else if (r->leaky) {
        float *p = r->y, a = r->alpha;
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) p[i] = p[i] < 0 ? p[i] * a : p[i];
    } else {
        /* omp simd: without it GCC kept this a scalar compare-and-move loop (a fused Conv+Relu's pass
         * over every output) */
        float *p = r->y;
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) p[i] = p[i] < 0 ? 0.0f : p[i];
    }
}

void wf__dn_relu_pass(wf__kctx *k, void *y, dnnl_data_type_t dt, int64_t n, int act, double alpha, double beta)
{
    relu_pass_arg r = {y, dt == dnnl_bf16, act == WF__ACT_LEAKY_RELU, (float)alpha, (float)beta, act};
    wf__parallel_for(k, n, 16384, relu_pass_range, &r);
}

/* Primitive attributes: the activation post-op (where wf__dn_act_in_prim), and a user-managed
 * scratchpad. oneDNN's default scratchpad is one global buffer shared by all primitives, which is wrong
 * as soon as two nodes run concurrently on different inter-op threads; with user mode each run context
 * (wf__dn_run) brings its own. */
dnnl_status_t wf__dn_attr(int act, double alpha, dnnl_primitive_attr_t *out)
{
    return wf__dn_attr_sum(act, alpha, false, out);
}

dnnl_status_t wf__dn_attr_sum(int act, double alpha, bool sum, dnnl_primitive_attr_t *out)
{
    *out = NULL;
    dnnl_alg_kind_t alg = dnnl_eltwise_relu;
    float a = 0;
    if (!wf__dn_act_in_prim(act, alpha)) act = WF__ACT_NONE; /* the caller's relu pass */
    switch (act) {
    case WF__ACT_LEAKY_RELU: alg = dnnl_eltwise_relu, a = (float)alpha; break;
    case WF__ACT_SIGMOID: alg = dnnl_eltwise_logistic; break;
    case WF__ACT_TANH: alg = dnnl_eltwise_tanh; break;
    case WF__ACT_SWISH: alg = dnnl_eltwise_swish, a = (float)alpha; break;
    case WF__ACT_HARDSWISH: alg = dnnl_eltwise_hardswish; break;
    default: act = WF__ACT_NONE; break;
    }
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && (act != WF__ACT_NONE || sum)) {
        st = dnnl_post_ops_create(&po);
        /* the sum first: the activation applies to the result plus what dst held */
        if (st == dnnl_success && sum) st = dnnl_post_ops_append_sum(po, 1.0f);
        if (st == dnnl_success && act != WF__ACT_NONE) st = dnnl_post_ops_append_eltwise(po, 1.0f, alg, a, 0.0f);
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (po) dnnl_post_ops_destroy(po);
    if (st != dnnl_success) {
        if (attr) dnnl_primitive_attr_destroy(attr);
        return st;
    }
    *out = attr;
    return dnnl_success;
}

dnnl_data_type_t wf__dn_dtype(wf_dtype t)
{
    switch (t) {
    case WF_F32: return dnnl_f32;
    case WF_BF16: return dnnl_bf16;
    case WF_F16: return dnnl_f16;
    default: return dnnl_data_type_undef;
    }
}

/* ---- epilogue in C (fallback paths and Gemm) -------------------------------------------------------- */

double wf__dn_act_d(int act, double alpha, double beta, double v)
{
    switch (act) {
    case WF__ACT_RELU: return v < 0 ? 0 : v; /* NaN stays NaN */
    case WF__ACT_LEAKY_RELU: return v >= 0 ? v : v * alpha;
    case WF__ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case WF__ACT_TANH: return tanh(v);
    case WF__ACT_SWISH: return v / (1.0 + exp(-alpha * v));
    case WF__ACT_GELU: return 0.5 * v * erfc(-v * 0.70710678118654752);
    case WF__ACT_CLIP: return (v < beta ? beta : v) > alpha ? alpha : (v < beta ? beta : v);
    case WF__ACT_GELU_TANH: return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    case WF__ACT_HARDSWISH: {
        double g = v * (1.0 / 6.0) + 0.5;
        return v * (g < 0 ? 0 : g > 1 ? 1 : g); /* NaN passes the selects */
    }
    default: return v;
    }
}

float wf__dn_act_f(int act, float alpha, float beta, float v)
{
    switch (act) {
    case WF__ACT_RELU: return v < 0 ? 0 : v; /* NaN stays NaN */
    case WF__ACT_LEAKY_RELU: return v >= 0 ? v : v * alpha;
    case WF__ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case WF__ACT_TANH: return tanhf(v);
    case WF__ACT_SWISH: return v / (1.0f + expf(-alpha * v));
    case WF__ACT_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case WF__ACT_CLIP: return (v < beta ? beta : v) > alpha ? alpha : (v < beta ? beta : v);
    case WF__ACT_GELU_TANH: return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    case WF__ACT_HARDSWISH: {
        float g = v * (1.0f / 6.0f) + 0.5f;
        return v * (g < 0 ? 0 : g > 1 ? 1 : g);
    }
    default: return v;
    }
}

/* y viewed as (outer, c, inner); bias (may be NULL) over c, then the activation. Works on y of dtype
 * t in place; bias has dtype t too. */
void wf__dn_conv_act_after(wf__kctx *k, float *y, int64_t n, int act, double alpha, double beta)
{
    if (act == WF__ACT_NONE || act == WF__ACT_RELU) return;
    if (!wf__dn_act_in_prim(act, alpha)) wf__dn_relu_pass(k, y, dnnl_f32, n, act, alpha, beta);
    else wf__dn_epilogue(y, WF_F32, 1, 1, n, NULL, act, alpha, beta);
}

void wf__dn_epilogue(void *y, wf_dtype t, int64_t outer, int64_t c, int64_t inner, const void *bias, int act,
                     double alpha, double beta)
{
    if (!bias && act == WF__ACT_NONE) return;
    int64_t n = outer * c * inner;
    if (t == WF_F32) {
        float *p = y;
        const float *b = bias;
        for (int64_t i = 0; i < n; i++) p[i] = wf__dn_act_f(act, (float)alpha, (float)beta, b ? p[i] + b[(i / inner) % c] : p[i]);
    } else if (t == WF_F64) {
        double *p = y;
        const double *b = bias;
        for (int64_t i = 0; i < n; i++) p[i] = wf__dn_act_d(act, alpha, beta, b ? p[i] + b[(i / inner) % c] : p[i]);
    } else if (t == WF_I32 || t == WF_I64) {
        for (int64_t i = 0; i < n; i++) {
            int64_t v = wf__load_i64(y, t, i);
            if (bias) v = (int64_t)((uint64_t)v + (uint64_t)wf__load_i64(bias, t, (i / inner) % c));
            if (act == WF__ACT_RELU && v < 0) v = 0;
            if (t == WF_I32) ((int32_t *)y)[i] = (int32_t)v;
            else ((int64_t *)y)[i] = v;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            double v = wf__load_f64(y, t, i);
            if (bias) v += wf__load_f64(bias, t, (i / inner) % c);
            wf__store_f64(y, t, i, wf__dn_act_d(act, alpha, beta, v));
        }
    }
}

/* f32 scratch of the 16-bit paths (an f16 MatMul, a bf16 first-layer convolution and its gradients): a
 * few megabytes per call, which the C library maps and unmaps each time, so a run paid their page faults
 * on every call (a bf16 CNN step spent more in them than in its convolutions). Freed blocks go to a
 * small cache of the calling thread (an inter-op thread runs one kernel at a time) and the next call of
 * that thread reuses them; the cache holds at most TMP_KEEP blocks and TMP_KEEP_BYTES, and goes with its
 * thread. Each block starts with its capacity. */
enum { TMP_KEEP = 6 };
#define TMP_KEEP_BYTES ((size_t)256 << 20)
typedef struct tmp_cache {
    void *blk[TMP_KEEP];
    size_t held;
} tmp_cache;
static pthread_key_t g_tmp_key;
static pthread_once_t g_tmp_once = PTHREAD_ONCE_INIT;

static void tmp_cache_free(void *arg)
{
    tmp_cache *c = arg;
    for (int i = 0; c && i < TMP_KEEP; i++) wf__aligned_free(c->blk[i]);
    free(c);
}

static void tmp_key_init(void) { pthread_key_create(&g_tmp_key, tmp_cache_free); }

static tmp_cache *tmp_get(void)
{
    pthread_once(&g_tmp_once, tmp_key_init);
    tmp_cache *c = pthread_getspecific(g_tmp_key);
    if (!c && (c = calloc(1, sizeof *c)) && pthread_setspecific(g_tmp_key, c)) {
        free(c);
        c = NULL;
    }
    return c;
}

static size_t tmp_cap(const void *blk) { return *(const size_t *)blk; }

static float *tmp_alloc(size_t bytes)
{
    tmp_cache *c = tmp_get();
    int best = -1;
    for (int i = 0; c && i < TMP_KEEP; i++)
        if (c->blk[i] && tmp_cap(c->blk[i]) >= bytes && (best < 0 || tmp_cap(c->blk[i]) < tmp_cap(c->blk[best])))
            best = i;
    void *blk;
    if (best >= 0) {
        blk = c->blk[best];
        c->blk[best] = NULL;
        c->held -= tmp_cap(blk);
    } else {
        if (!(blk = wf__aligned_alloc(bytes + WF__ALIGN, WF__ALIGN))) return NULL;
        *(size_t *)blk = bytes;
    }
    return (float *)((char *)blk + WF__ALIGN);
}

void wf__dn_tmp_free(void *p)
{
    if (!p) return;
    void *blk = (char *)p - WF__ALIGN;
    tmp_cache *c = tmp_get();
    size_t cap = tmp_cap(blk);
    int slot = -1;
    for (int i = 0; c && i < TMP_KEEP && slot < 0; i++)
        if (!c->blk[i]) slot = i;
    if (c && slot < 0) { /* full: make room by dropping the smallest block, if it is smaller than this one */
        int small = 0;
        for (int i = 1; i < TMP_KEEP; i++)
            if (tmp_cap(c->blk[i]) < tmp_cap(c->blk[small])) small = i;
        if (tmp_cap(c->blk[small]) < cap) {
            c->held -= tmp_cap(c->blk[small]);
            wf__aligned_free(c->blk[small]);
            c->blk[small] = NULL;
            slot = small;
        }
    }
    if (slot < 0 || c->held + cap > TMP_KEEP_BYTES) {
        wf__aligned_free(blk);
        return;
    }
    c->blk[slot] = blk;
    c->held += cap;
}

void wf__dn_tmp_flush(void)
{
    tmp_cache *c = tmp_get();
    for (int i = 0; c && i < TMP_KEEP; i++) {
        wf__aligned_free(c->blk[i]);
        c->blk[i] = NULL;
    }
    if (c) c->held = 0;
}

/* An uninitialised f32 scratch buffer of n elements; free with wf__dn_tmp_free. */
wf_status *wf__dn_alloc_f32(wf__kctx *k, int64_t n, float **out)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    *out = tmp_alloc(bytes);
    return *out ? NULL : wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for f32 scratch on CPU:0", bytes);
}

typedef struct to_f32_arg {
    const char *src;
    size_t es;
    wf_dtype from;
    float *dst;
    int64_t n;
} to_f32_arg;

enum { TO_F32_CHUNK = 65536 };

static void to_f32_range(void *arg, int64_t c0, int64_t c1)
{
    const to_f32_arg *a = arg;
    int64_t i0 = c0 * TO_F32_CHUNK, i1 = c1 * TO_F32_CHUNK < a->n ? c1 * TO_F32_CHUNK : a->n;
    wf__convert(a->src + (size_t)i0 * a->es, a->from, a->dst + i0, WF_F32, i1 - i0);
}

typedef struct from_f32_arg {
    const float *src;
    char *dst;
    size_t es;
    wf_dtype to;
    int64_t n;
    int act;
    float alpha, beta;
} from_f32_arg;

WF__VEC static void from_f32_range(void *arg, int64_t c0, int64_t c1)
{
    const from_f32_arg *a = arg;
    int64_t i0 = c0 * TO_F32_CHUNK, i1 = c1 * TO_F32_CHUNK < a->n ? c1 * TO_F32_CHUNK : a->n;
    float buf[1024];
    for (int64_t b = i0; b < i1; b += 1024) {
        int64_t m = i1 - b < 1024 ? i1 - b : 1024;
        const float *s = a->src + b;
        if (a->act == WF__ACT_RELU) {
            /* NaN stays NaN, as wf__dn_act_f */
            _Pragma("omp simd") for (int64_t i = 0; i < m; i++) buf[i] = s[i] < 0 ? 0.0f : s[i];
        } else {
            for (int64_t i = 0; i < m; i++) buf[i] = wf__dn_act_f(a->act, a->alpha, a->beta, s[i]);
        }
        wf__convert(buf, WF_F32, a->dst + (size_t)b * a->es, a->to, m);
    }
}

void wf__dn_from_f32(wf__kctx *k, const float *src, void *dst, wf_dtype to, int64_t n, int act, double alpha,
                     double beta)
{
    from_f32_arg a = {src, dst, wf_dtype_size(to), to, n, act, (float)alpha, (float)beta};
    if (act == WF__ACT_NONE && n <= 4 * TO_F32_CHUNK) {
        wf__convert(src, WF_F32, dst, to, n);
        return;
    }
    wf__parallel_for(k, (n + TO_F32_CHUNK - 1) / TO_F32_CHUNK, 1, from_f32_range, &a);
}

/* A buffer of n elements of `from` converted to f32 (NULL p gives NULL); free with wf__dn_tmp_free. */
wf_status *wf__dn_to_f32(wf__kctx *k, const void *p, wf_dtype from, int64_t n, float **out)
{
    *out = NULL;
    if (!p) return NULL;
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    float *f = tmp_alloc(bytes);
    if (!f) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for an f32 copy on CPU:0", bytes);
    to_f32_arg a = {p, wf_dtype_size(from), from, f, n};
    if (n > 4 * TO_F32_CHUNK) wf__parallel_for(k, (n + TO_F32_CHUNK - 1) / TO_F32_CHUNK, 1, to_f32_range, &a);
    else if (n > 0) wf__convert(p, from, f, WF_F32, n);
    *out = f;
    return NULL;
}

/* Level 3's layout (lower/layout.c) is the one oneDNN itself picks for a typical convolution on this
 * CPU when left free: asked once, with a primitive descriptor and no primitive. oneDNN 2.6 picks
 * channels-last (nhwc) for its brgconv kernels on AVX-512 and nChw8c on AVX2; forcing nChw16c on an
 * AVX-512 machine sent ResNet-50's convolutions to its older jit kernels (no faster than plain NCHW),
 * while nhwc made their oneDNN time 27% smaller (ONEDNN_VERBOSE, 2 threads). */
static pthread_once_t g_layout_once = PTHREAD_ONCE_INIT;
static int g_layout_block;
static dnnl_format_tag_t g_layout_tag = dnnl_abcd;

static void layout_probe(void)
{
    pthread_once(&g_engine_once, engine_init);
    if (g_engine_status != dnnl_success) return;
    /* WEFT_CPU_LAYOUT=nhwc|8|16 (tests): that layout instead of oneDNN's choice, so that every blocked
     * kernel path runs on any machine (scripts/run-tests.sh runs test_passes under each); oneDNN's
     * convolutions take any of them, more slowly where they are not its choice */
    const char *force = getenv("WEFT_CPU_LAYOUT");
    if (force && *force) {
        if (!strcmp(force, "nhwc")) g_layout_tag = dnnl_acdb, g_layout_block = 1;
        else if (!strcmp(force, "8")) g_layout_tag = dnnl_aBcd8b, g_layout_block = 8;
        else if (!strcmp(force, "16")) g_layout_tag = dnnl_aBcd16b, g_layout_block = 16;
        return;
    }
    dnnl_dims_t sd = {1, 64, 56, 56}, wd = {64, 64, 3, 3}, st = {1, 1}, pad = {1, 1};
    dnnl_memory_desc_t src, wei, dst;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&dst, 4, sd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei, NULL,
                                           &dst, st, pad, pad) ||
        dnnl_primitive_desc_create(&pd, &cd, NULL, g_engine, NULL))
        return;
    const dnnl_memory_desc_t *got = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    static const struct {
        dnnl_format_tag_t tag;
        int block;
    } known[] = {{dnnl_acdb, 1}, {dnnl_aBcd16b, 16}, {dnnl_aBcd8b, 8}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        dnnl_memory_desc_t m;
        if (!dnnl_memory_desc_init_by_tag(&m, 4, sd, dnnl_f32, known[i].tag) && dnnl_memory_desc_equal(&m, got)) {
            g_layout_tag = known[i].tag;
            g_layout_block = known[i].block;
            break;
        }
    }
    dnnl_primitive_desc_destroy(pd);
}

int wf__dn_channel_block(void)
{
    pthread_once(&g_layout_once, layout_probe);
    return g_layout_block;
}

/* The weights in the primitive's layout. Weights whose content is stamped (wf_tensor.version: a Const,
 * a variable's committed value) are reordered once per version into the node's cache: a run compares one
 * integer, and a variable assigned between runs invalidates exactly the nodes it feeds. Unstamped
 * weights (fed by the caller, or computed by the run) are reordered into the run context every run. On
 * a cache hit, or when this run refreshed the cache, *cached is set and the caller must call
 * wf__dn_weights_done. (Conv2D's, and MatMul's and Gemm's with a constant 2-D B.) */
wf_status *wf__dn_weights_with(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, uint64_t wver, size_t pb,
                               wf__dn_pack_fn pack, void *arg, void **wbuf, bool *cached)
{
    *wbuf = NULL;
    *cached = false;
    wf_status *s = NULL;
    if (wver) {
        pthread_mutex_lock(&p->lock);
        if (p->wcache && p->wver == wver) {
            p->wusers++;
            *wbuf = p->wcache;
            *cached = true;
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        if (!p->wusers) {
            /* refresh the cache in place (concurrent runs of this node wait on the lock meanwhile) */
            p->wver = 0;
            if (!p->wcache) p->wcache = wf__aligned_alloc(pb ? pb : 1, WF__ALIGN);
            if (!p->wcache) {
                pthread_mutex_unlock(&p->lock);
                return wf__kctx_fail(k, WF_OUT_OF_MEMORY,
                                     "out of memory allocating %zu bytes for reordered weights on CPU:0", pb);
            }
            s = pack(k, arg, p->wcache);
            wf__dn_count_wpack();
            if (!s) {
                p->wver = wver;
                p->wusers++;
                *wbuf = p->wcache;
                *cached = true;
            }
            pthread_mutex_unlock(&p->lock);
            return s;
        }
        pthread_mutex_unlock(&p->lock);
    }
    /* unstamped, or another run reads the cache: this run's own copy */
    WF__TRY(wf__dn_run_buf(k, r, WF__DN_BUF_WEI, pb, wbuf));
    wf__dn_count_wpack();
    return pack(k, arg, *wbuf);
}

typedef struct dn_wreorder_arg {
    wf__dn_prim *p;
    wf__dn_run *r;
    const void *w;
} dn_wreorder_arg;

static wf_status *dn_wreorder(wf__kctx *k, void *arg, void *dst)
{
    const dn_wreorder_arg *a = arg;
    return wf__dn_reorder(k, a->r, WF__DN_SLOT_WREORDER, a->p->wreorder, &a->p->md[WF__DN_WEI], a->w,
                          &a->p->md[WF__DN_WEI_PRIM], dst, &a->p->wscratch);
}

wf_status *wf__dn_weights(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, const void *w, uint64_t wver, void **wbuf,
                          bool *cached)
{
    dn_wreorder_arg a = {p, r, w};
    return wf__dn_weights_with(k, p, r, wver, dnnl_memory_desc_get_size(&p->md[WF__DN_WEI_PRIM]), dn_wreorder, &a,
                               wbuf, cached);
}

void wf__dn_weights_done(wf__dn_prim *p, bool cached)
{
    if (!cached) return;
    pthread_mutex_lock(&p->lock);
    p->wusers--;
    pthread_mutex_unlock(&p->lock);
}

static pthread_once_t g_fast_once = PTHREAD_ONCE_INIT;
static uint32_t g_fast;
static char g_fast_note[96];

static void fast_probe(void)
{
    /* bf16 is native where the CPU has AVX512_BF16 (dot products) or AMX (tiles) and oneDNN may use them
     * (ONEDNN_MAX_CPU_ISA can cap it below avx512_core_bf16). f16 MatMul and Conv convert through f32
     * here (k_dnnl_matmul.c), so the CPU never claims f16, whatever AVX512_FP16 says. */
    /* cpuid leaf 7: subleaf 1 EAX bit 5 is AVX512_BF16, subleaf 0 EDX bit 22 AMX-BF16 (read directly: not
     * every compiler's __builtin_cpu_supports knows "amx-bf16"); the OS's part is oneDNN's ISA check */
    unsigned a = 0, b = 0, c = 0, d = 0;
    bool dot = false, amx = false;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        amx = (d >> 22) & 1;
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) dot = (a >> 5) & 1;
    }
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), need = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    if ((dot || amx) && (isa & need) == need) {
        snprintf(g_fast_note, sizeof g_fast_note, "bf16: %s%s%s (oneDNN); f16 through f32", dot ? "AVX512_BF16" : "",
                 dot && amx ? ", " : "", amx ? "AMX" : "");
        g_fast = 1u << WF_BF16;
        return;
    }
    snprintf(g_fast_note, sizeof g_fast_note, "no native bf16 (%s); f16 through f32",
             dot || amx ? "oneDNN's ISA is capped below avx512_core_bf16" : "no AVX512_BF16 or AMX");
}

uint32_t wf__dn_fast_dtypes(char *note, size_t cap)
{
    pthread_once(&g_fast_once, fast_probe);
    if (note && cap) snprintf(note, cap, "%s", g_fast_note);
    return g_fast;
}

dnnl_format_tag_t wf__dn_blocked_tag(void)
{
    pthread_once(&g_layout_once, layout_probe);
    return g_layout_tag;
}

const wf_tensor *wf__dn_fused_bias(const wf__kctx *k)
{
    return k->fused_bias >= 0 && k->fused_bias < k->n_in ? k->in[k->fused_bias] : NULL;
}

/* ---- BiasAdd ------------------------------------------------------------------------------------- */

typedef struct bias_arg {
    const void *x, *b;
    void *y;
    int64_t c, inner;
    wf_dtype t;
} bias_arg;

/* rows are (outer, c) pairs of `inner` contiguous elements; NHWC has inner == 1, so there a row is a
 * whole last-dim vector instead (see k_bias_add). Integers add through uint64 to wrap like numpy. */
#define BIAS_LOOP(NAME, T, ADD)                                                                            \
    WF__VEC static void NAME(void *arg, int64_t r0, int64_t r1)                                            \
    {                                                                                                      \
        const bias_arg *ba = arg;                                                                          \
        const T *x = ba->x, *b = ba->b;                                                                    \
        T *y = ba->y;                                                                                      \
        int64_t c = ba->c, in = ba->inner;                                                                 \
        if (in == 1) {                                                                                     \
            for (int64_t r = r0; r < r1; r++)                                                              \
                for (int64_t j = 0; j < c; j++) y[r * c + j] = ADD(x[r * c + j], b[j]);                    \
        } else {                                                                                           \
            for (int64_t r = r0; r < r1; r++) {                                                            \
                T bv = b[r % c];                                                                           \
                for (int64_t j = 0; j < in; j++) y[r * in + j] = ADD(x[r * in + j], bv);                   \
            }                                                                                              \
        }                                                                                                  \
    }
#define ADD_F(a, b) ((a) + (b))
#define ADD_I(a, b) ((a) + (b)) /* narrow ints promote to int: no overflow; the store wraps */
#define ADD_W(a, b) ((__typeof__(a))((uint64_t)(a) + (uint64_t)(b)))
BIAS_LOOP(bias_f32, float, ADD_F)
BIAS_LOOP(bias_f64, double, ADD_F)
BIAS_LOOP(bias_i8, int8_t, ADD_I)
BIAS_LOOP(bias_u8, uint8_t, ADD_I)
BIAS_LOOP(bias_i16, int16_t, ADD_I)
BIAS_LOOP(bias_i32, int32_t, ADD_W)
BIAS_LOOP(bias_i64, int64_t, ADD_W)

static void bias_lowp(void *arg, int64_t r0, int64_t r1)
{
    const bias_arg *ba = arg;
    const uint16_t *x = ba->x, *b = ba->b;
    uint16_t *y = ba->y;
    bool bf = ba->t == WF_BF16;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t j = 0; j < (ba->inner == 1 ? ba->c : ba->inner); j++) {
            int64_t i = ba->inner == 1 ? r * ba->c + j : r * ba->inner + j;
            uint16_t bv = b[ba->inner == 1 ? j : r % ba->c];
            y[i] = bf ? wf__f2bf(wf__bf2f(x[i]) + wf__bf2f(bv)) : wf__f2h(wf__h2f(x[i]) + wf__h2f(bv));
        }
}

static wf_status *k_bias_add(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *b = k->in[1];
    bool nchw = !strcmp(wf__attr_s(k->op, k->attrs, "data_format"), "NCHW");
    int ax = nchw ? 1 : x->rank - 1;
    char sx[160], sb[160];
    if (x->rank < (nchw ? 2 : 1) || b->rank != 1 || x->dims[ax] != b->dims[0] || b->dtype != x->dtype)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "bias %s%s does not match channel dim %d of x %s%s",
                             wf_dtype_name(b->dtype), wf__shape_str(b->rank, b->dims, sb), ax,
                             wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, sx));
    wf_tensor *y;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, NULL));
    if (!x->size) return NULL;
    int64_t c = b->dims[0], inner = 1;
    for (int i = ax + 1; i < x->rank; i++) inner *= x->dims[i];
    bias_arg ba = {x->data, b->data, y->data, c, inner, x->dtype};
    int64_t rows = inner == 1 ? x->size / c : x->size / inner, per_row = inner == 1 ? c : inner;
    wf__range_fn fn;
    switch (x->dtype) {
    case WF_F32: fn = bias_f32; break;
    case WF_F64: fn = bias_f64; break;
    case WF_I8: fn = bias_i8; break;
    case WF_U8: fn = bias_u8; break;
    case WF_I16: fn = bias_i16; break;
    case WF_I32: fn = bias_i32; break;
    case WF_I64: fn = bias_i64; break;
    case WF_F16: case WF_BF16: fn = bias_lowp; break;
    default: return wf__kctx_fail(k, WF_UNIMPLEMENTED, "no BiasAdd kernel for %s", wf_dtype_name(x->dtype));
    }
    wf__parallel_for(k, rows, 32768 / per_row + 1, fn, &ba);
    return NULL;
}

/* ---- kernel table -------------------------------------------------------------------------------- */

const wf__kernel_def wf__cpu_kernels_nn[] = {
    {"MatMul", "CPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64), 0, wf__dn_k_matmul, wf__dn_free_state,
     WF__K_EPILOGUE},
    {"Gemm", "CPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64), 0, wf__dn_k_gemm, wf__dn_free_state,
     WF__K_EPILOGUE},
    {"BiasAdd", "CPU", WF__DT_NUMERIC, 0, k_bias_add, NULL, WF__K_INPLACE},
    {"Conv2D", "CPU", WF__DT_FLOATS, 0, wf__dn_k_conv, wf__dn_free_state, WF__K_EPILOGUE | WF__K_BLOCKED},
    {"ConvTranspose2D", "CPU", WF__DT_FLOATS, 0, wf__dn_k_convt, NULL, 0},
    {"MaxPool2D", "CPU", WF__DT_FLOATS, 0, wf__dn_k_pool, wf__dn_free_state, WF__K_BLOCKED},
    {"AvgPool2D", "CPU", WF__DT_FLOATS, 0, wf__dn_k_pool, wf__dn_free_state, WF__K_BLOCKED},
    {"GlobalAvgPool", "CPU", WF__DT_FLOATS, 0, wf__dn_k_global_avg_pool, wf__dn_free_state, WF__K_BLOCKED},
    {0},
};
