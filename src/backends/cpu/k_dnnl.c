/*
 * CPU kernels for the neural-network ops. MatMul, Gemm and Conv2D go through oneDNN (f32 and bf16; f16
 * converts through f32) with their primitives cached per plan node; f64 and integer variants, BiasAdd,
 * ConvTranspose2D and the pools are direct C loops below that are simple to prove right.
 */
#include "device/kernel.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>


/* The window geometry of Conv2D, ConvTranspose2D and the pools, resolved by the op registry
 * (src/graph/ops_nn.c) so inference and kernels agree on shapes and pads. */
typedef struct wf__nn_window {
    int64_t k[2], s[2], d[2];
    int64_t pb[2], pe[2];
    int64_t opad[2];
    int64_t out[2];
} wf__nn_window;
enum { WF__WIN_CONV = 0, WF__WIN_POOL = 1, WF__WIN_CONVT = 2 };
int wf__nn_window_resolve(const wf__op_def *op, const wf__attr *attrs, int kind, const int64_t *in_hw,
                          const int64_t *wk, wf__nn_window *w, char *err, size_t en);

/* A cached oneDNN primitive, keyed by everything its creation depended on (shapes, dtypes, epilogue). */
#define DN_KEY_MAX 96
enum { DN_SRC = 0, DN_WEI = 1, DN_BIAS = 2, DN_DST = 3, DN_WEI_PRIM = 4 };
typedef struct dn_prim {
    int64_t key[DN_KEY_MAX];
    int nkey;
    int refs;
    dnnl_primitive_t prim;
    dnnl_primitive_t wreorder; /* Conv2D: user weights to the primitive's layout; NULL when equal */
    size_t wbytes;             /* size of the reordered weights */
    dnnl_memory_desc_t md[5];
    dnnl_memory_desc_t scratch, wscratch; /* scratchpads of prim and wreorder (size 0: none) */
} dn_prim;
typedef wf_status *(*dn_build_fn)(wf__kctx *k, void *arg, dnnl_engine_t eng, dn_prim *p);

/* ---- shared oneDNN plumbing ---------------------------------------------------------------------- */

/* One engine for the process: oneDNN engines are thread-safe, streams are not (one per call). */
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine;
static dnnl_status_t g_engine_status;

static void engine_init(void) { g_engine_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0); }

static wf_status *dn_fail(const wf__kctx *k, dnnl_status_t st, const char *what)
{
    wf_code code = st == dnnl_out_of_memory ? WF_OUT_OF_MEMORY
                   : st == dnnl_unimplemented ? WF_UNIMPLEMENTED
                   : st == dnnl_invalid_arguments ? WF_INVALID_ARGUMENT : WF_INTERNAL;
    return wf__kctx_fail(k, code, "oneDNN %s failed: %s", what, dnnl_status2str(st));
}

static wf_status *dn_engine(const wf__kctx *k, dnnl_engine_t *out)
{
    pthread_once(&g_engine_once, engine_init);
    if (g_engine_status != dnnl_success) return dn_fail(k, g_engine_status, "CPU engine creation");
    *out = g_engine;
    return NULL;
}

static void dn_prim_destroy(dn_prim *p)
{
    if (!p) return;
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->wreorder) dnnl_primitive_destroy(p->wreorder);
    wf__free(p);
}

/* The node's state holds one reference to the current primitive and each run in flight another, so a
 * shape change can replace the primitive while an older run still executes the previous one. */
static void dn_free_state(void *state)
{
    dn_prim *p = state;
    if (p && --p->refs == 0) dn_prim_destroy(p);
}

static wf_status *dn_acquire(wf__kctx *k, const int64_t *key, int nkey, dn_build_fn build, void *arg,
                          dn_prim **out)
{
    dnnl_engine_t eng = NULL;
    WF__TRY(dn_engine(k, &eng));
    if (nkey > DN_KEY_MAX) return wf__kctx_fail(k, WF_INTERNAL, "primitive key too long (%d)", nkey);
    bool cached = k->state != NULL;
    if (cached) wf__kctx_lock_state(k);
    dn_prim *cur = cached ? *k->state : NULL;
    if (cur && cur->nkey == nkey && !memcmp(cur->key, key, sizeof(int64_t) * (size_t)nkey)) {
        cur->refs++;
        wf__kctx_unlock_state(k);
        *out = cur;
        return NULL;
    }
    wf_status *s = NULL;
    dn_prim *p = wf__calloc(1, sizeof *p);
    if (!p) {
        s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for a primitive cache entry",
                          sizeof *p);
        goto done;
    }
    p->nkey = nkey;
    memcpy(p->key, key, sizeof(int64_t) * (size_t)nkey);
    /* oneDNN picks its implementation and sizes its scratchpad for the thread count in effect at
     * creation; execution may use fewer threads (the intra-op gate) but never more. */
    int tok = wf__intra_begin_create(k);
    s = build(k, arg, eng, p);
    wf__intra_end(k, tok);
    if (s) {
        dn_prim_destroy(p);
        goto done;
    }
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

static void dn_release(wf__kctx *k, dn_prim *p)
{
    if (!p) return;
    if (k->state) wf__kctx_lock_state(k);
    bool last = --p->refs == 0;
    if (k->state) wf__kctx_unlock_state(k);
    if (last) dn_prim_destroy(p);
}

static wf_status *dn_exec(wf__kctx *k, dnnl_primitive_t prim, int n, const int *ids,
                       const dnnl_memory_desc_t *const *mds, void *const *ptrs, const dnnl_memory_desc_t *scratch)
{
    dnnl_engine_t eng = NULL;
    WF__TRY(dn_engine(k, &eng));
    dnnl_memory_t mem[8] = {0};
    dnnl_exec_arg_t args[8];
    dnnl_stream_t stream = NULL;
    wf_status *s = NULL;
    dnnl_status_t st;
    size_t sbytes = scratch ? dnnl_memory_desc_get_size(scratch) : 0;
    void *sbuf = NULL;
    if (sbytes) {
        if (!(sbuf = wf__aligned_alloc(sbytes, WF__ALIGN)))
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes of oneDNN scratchpad on CPU:0",
                                 sbytes);
        if ((st = dnnl_memory_create(&mem[n], scratch, eng, sbuf)) != dnnl_success) {
            s = dn_fail(k, st, "scratchpad creation");
            goto done;
        }
        args[n].arg = DNNL_ARG_SCRATCHPAD;
        args[n].memory = mem[n];
    }
    for (int i = 0; i < n; i++) {
        if ((st = dnnl_memory_create(&mem[i], mds[i], eng, ptrs[i])) != dnnl_success) {
            s = dn_fail(k, st, "memory creation");
            goto done;
        }
        args[i].arg = ids[i];
        args[i].memory = mem[i];
    }
    if ((st = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags)) != dnnl_success) {
        s = dn_fail(k, st, "stream creation");
        goto done;
    }
    int tok = wf__intra_begin(k);
    st = dnnl_primitive_execute(prim, stream, n + (sbytes != 0), args);
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    wf__intra_end(k, tok);
    if (st != dnnl_success) s = dn_fail(k, st, "execution");
done:
    if (stream) dnnl_stream_destroy(stream);
    for (int i = 0; i <= n; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    wf__aligned_free(sbuf);
    return s;
}

/* Primitive attributes: the activation post-op, and a user-managed scratchpad. oneDNN's default
 * scratchpad is one global buffer shared by all primitives, which is wrong as soon as two nodes run
 * concurrently on different inter-op threads; with user mode each execution brings its own. */
static dnnl_status_t dn_act_attr(int act, double alpha, dnnl_primitive_attr_t *out)
{
    *out = NULL;
    dnnl_alg_kind_t alg = dnnl_eltwise_relu;
    float a = 0;
    switch (act) {
    case WF__ACT_RELU: alg = dnnl_eltwise_relu; break;
    case WF__ACT_LEAKY_RELU: alg = dnnl_eltwise_relu, a = (float)alpha; break;
    case WF__ACT_SIGMOID: alg = dnnl_eltwise_logistic; break;
    case WF__ACT_TANH: alg = dnnl_eltwise_tanh; break;
    default: act = WF__ACT_NONE; break;
    }
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && act != WF__ACT_NONE) {
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success) st = dnnl_post_ops_append_eltwise(po, 1.0f, alg, a, 0.0f);
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

static dnnl_data_type_t dn_dtype(wf_dtype t)
{
    switch (t) {
    case WF_F32: return dnnl_f32;
    case WF_BF16: return dnnl_bf16;
    case WF_F16: return dnnl_f16;
    default: return dnnl_data_type_undef;
    }
}

/* ---- epilogue in C (fallback paths and Gemm) -------------------------------------------------------- */

static double act_d(int act, double alpha, double v)
{
    switch (act) {
    case WF__ACT_RELU: return v > 0 ? v : 0;
    case WF__ACT_LEAKY_RELU: return v >= 0 ? v : v * alpha;
    case WF__ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case WF__ACT_TANH: return tanh(v);
    default: return v;
    }
}

static float act_f(int act, float alpha, float v)
{
    switch (act) {
    case WF__ACT_RELU: return v > 0 ? v : 0;
    case WF__ACT_LEAKY_RELU: return v >= 0 ? v : v * alpha;
    case WF__ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case WF__ACT_TANH: return tanhf(v);
    default: return v;
    }
}

/* y viewed as (outer, c, inner); bias (may be NULL) over c, then the activation. Works on y of dtype
 * t in place; bias has dtype t too. */
static void epilogue(void *y, wf_dtype t, int64_t outer, int64_t c, int64_t inner, const void *bias, int act,
                  double alpha)
{
    if (!bias && act == WF__ACT_NONE) return;
    int64_t n = outer * c * inner;
    if (t == WF_F32) {
        float *p = y;
        const float *b = bias;
        for (int64_t i = 0; i < n; i++) p[i] = act_f(act, (float)alpha, b ? p[i] + b[(i / inner) % c] : p[i]);
    } else if (t == WF_F64) {
        double *p = y;
        const double *b = bias;
        for (int64_t i = 0; i < n; i++) p[i] = act_d(act, alpha, b ? p[i] + b[(i / inner) % c] : p[i]);
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
            wf__store_f64(y, t, i, act_d(act, alpha, v));
        }
    }
}

/* An uninitialised f32 scratch buffer of n elements; free with wf__aligned_free. */
static wf_status *alloc_f32(wf__kctx *k, int64_t n, float **out)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    *out = wf__aligned_alloc(bytes, WF__ALIGN);
    return *out ? NULL : wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for f32 scratch on CPU:0", bytes);
}

/* A buffer of n elements of `from` converted to f32 (NULL p gives NULL). */
static wf_status *to_f32(wf__kctx *k, const void *p, wf_dtype from, int64_t n, float **out)
{
    *out = NULL;
    if (!p) return NULL;
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    float *f = wf__aligned_alloc(bytes, WF__ALIGN);
    if (!f) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for an f32 copy on CPU:0", bytes);
    wf__convert(p, from, f, WF_F32, n);
    *out = f;
    return NULL;
}

/* ---- MatMul -------------------------------------------------------------------------------------- */

#define MM_MAXND (WF_MAX_RANK + 2)

typedef struct mm_geom {
    int64_t m, n, kdim;
    int nb;                          /* broadcast batch rank */
    int64_t bat[WF_MAX_RANK], abat[WF_MAX_RANK], bbat[WF_MAX_RANK];
    int64_t batch;                   /* product of bat */
    int ta, tb;
    int out_rank;
    int64_t out_dims[WF_MAX_RANK];
} mm_geom;

/* Resolves numpy matmul shapes of the actual inputs (they may differ from the planned ones). */
static wf_status *mm_plan(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, int ta, int tb, mm_geom *g)
{
    memset(g, 0, sizeof *g);
    char sa[160], sb[160];
    if (a->rank == 0 || b->rank == 0)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "operands must have rank >= 1, got A %s%s and B %s%s",
                             wf_dtype_name(a->dtype), wf__shape_str(a->rank, a->dims, sa),
                             wf_dtype_name(b->dtype), wf__shape_str(b->rank, b->dims, sb));
    g->ta = a->rank > 1 && ta;
    g->tb = b->rank > 1 && tb;
    int64_t ka, kb;
    if (a->rank == 1) g->m = 1, ka = a->dims[0];
    else g->m = a->dims[a->rank - (g->ta ? 1 : 2)], ka = a->dims[a->rank - (g->ta ? 2 : 1)];
    if (b->rank == 1) kb = b->dims[0], g->n = 1;
    else kb = b->dims[b->rank - (g->tb ? 1 : 2)], g->n = b->dims[b->rank - (g->tb ? 2 : 1)];
    if (ka != kb)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "A %s%s and B %s%s have incompatible inner dims %lld and %lld",
                             wf_dtype_name(a->dtype), wf__shape_str(a->rank, a->dims, sa), wf_dtype_name(b->dtype),
                             wf__shape_str(b->rank, b->dims, sb), (long long)ka, (long long)kb);
    g->kdim = ka;
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0;
    g->nb = ra > rb ? ra : rb;
    g->batch = 1;
    for (int i = 0; i < g->nb; i++) {
        int ia = i - (g->nb - ra), ib = i - (g->nb - rb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "A %s%s and B %s%s have batch dims that do not broadcast",
                                 wf_dtype_name(a->dtype), wf__shape_str(a->rank, a->dims, sa),
                                 wf_dtype_name(b->dtype), wf__shape_str(b->rank, b->dims, sb));
        g->abat[i] = da;
        g->bbat[i] = db;
        g->bat[i] = da == 1 ? db : da;
        g->batch *= g->bat[i];
    }
    g->out_rank = 0;
    for (int i = 0; i < g->nb; i++) g->out_dims[g->out_rank++] = g->bat[i];
    if (a->rank > 1) g->out_dims[g->out_rank++] = g->m;
    if (b->rank > 1) g->out_dims[g->out_rank++] = g->n;
    return NULL;
}

typedef struct mm_desc {
    int nd;
    int64_t ad[MM_MAXND], as[MM_MAXND], bd[MM_MAXND], bs[MM_MAXND], cd[MM_MAXND], cs[MM_MAXND];
} mm_desc;

static void rowmajor(int nd, const int64_t *d, int64_t *s)
{
    int64_t acc = 1;
    for (int i = nd - 1; i >= 0; i--) {
        s[i] = acc;
        acc *= d[i] > 0 ? d[i] : 1;
    }
}

/* oneDNN dims and strides for A, B and C. When B has no batch and A needs no transpose, A's batch folds
 * into M: one large GEMM instead of many small ones. */
static void mm_describe(const mm_geom *g, mm_desc *d)
{
    int64_t bb = 1;
    for (int i = 0; i < g->nb; i++) bb *= g->bbat[i];
    bool fold = bb == 1 && !g->ta && g->nb > 0;
    int nb = fold ? 0 : g->nb;
    int64_t m = fold ? g->m * g->batch : g->m;
    d->nd = nb + 2;
    for (int i = 0; i < nb; i++) d->ad[i] = g->abat[i], d->bd[i] = g->bbat[i], d->cd[i] = g->bat[i];
    d->ad[nb] = m, d->ad[nb + 1] = g->kdim;
    d->bd[nb] = g->kdim, d->bd[nb + 1] = g->n;
    d->cd[nb] = m, d->cd[nb + 1] = g->n;
    /* strides of the stored layout: transposed operands are (.., K, M) and (.., N, K) in memory */
    int64_t st[MM_MAXND] = {0}, tmp[MM_MAXND] = {0};
    memcpy(tmp, d->ad, sizeof tmp);
    if (g->ta) tmp[nb] = g->kdim, tmp[nb + 1] = m;
    rowmajor(d->nd, tmp, st);
    memcpy(d->as, st, sizeof st);
    if (g->ta) d->as[nb] = 1, d->as[nb + 1] = m;
    memcpy(tmp, d->bd, sizeof tmp);
    if (g->tb) tmp[nb] = g->n, tmp[nb + 1] = g->kdim;
    rowmajor(d->nd, tmp, st);
    memcpy(d->bs, st, sizeof st);
    if (g->tb) d->bs[nb] = 1, d->bs[nb + 1] = g->kdim;
    rowmajor(d->nd, d->cd, d->cs);
}

typedef struct mm_build_arg {
    const mm_desc *d;
    dnnl_data_type_t dt, bias_dt; /* bias_dt undef: no bias */
    int act;
    double alpha;
} mm_build_arg;

static wf_status *mm_build(wf__kctx *k, void *arg, dnnl_engine_t eng, dn_prim *p)
{
    const mm_build_arg *ba = arg;
    const mm_desc *d = ba->d;
    dnnl_dims_t ad, as, bd, bs, cd, cs, biasd, biass;
    for (int i = 0; i < d->nd; i++) {
        ad[i] = d->ad[i], as[i] = d->as[i], bd[i] = d->bd[i], bs[i] = d->bs[i], cd[i] = d->cd[i], cs[i] = d->cs[i];
        biasd[i] = i == d->nd - 1 ? d->cd[i] : 1;
    }
    int64_t bst[MM_MAXND];
    int64_t bdims[MM_MAXND];
    for (int i = 0; i < d->nd; i++) bdims[i] = biasd[i];
    rowmajor(d->nd, bdims, bst);
    for (int i = 0; i < d->nd; i++) biass[i] = bst[i];
    dnnl_status_t st;
    const char *what = "matmul memory descriptor";
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t md;
    bool bias = ba->bias_dt != dnnl_data_type_undef;
    if ((st = dnnl_memory_desc_init_by_strides(&p->md[DN_SRC], d->nd, ad, ba->dt, as)) ||
        (st = dnnl_memory_desc_init_by_strides(&p->md[DN_WEI], d->nd, bd, ba->dt, bs)) ||
        (st = dnnl_memory_desc_init_by_strides(&p->md[DN_DST], d->nd, cd, ba->dt, cs)) ||
        (bias && (st = dnnl_memory_desc_init_by_strides(&p->md[DN_BIAS], d->nd, biasd, ba->bias_dt, biass))))
        goto fail;
    what = "matmul descriptor";
    if ((st = dnnl_matmul_desc_init(&md, &p->md[DN_SRC], &p->md[DN_WEI], bias ? &p->md[DN_BIAS] : NULL,
                                    &p->md[DN_DST])))
        goto fail;
    what = "matmul post-op";
    if ((st = dn_act_attr(ba->act, ba->alpha, &attr))) goto fail;
    what = "matmul primitive descriptor";
    if ((st = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL))) goto fail;
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    what = "matmul primitive";
    st = dnnl_primitive_create(&p->prim, pd);
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st == dnnl_success ? NULL : dn_fail(k, st, what);
}

/* C = A @ B (+ bias over N, then act) through oneDNN; all pointers are of dnnl type dt (bias: bias_dt). */
static wf_status *mm_dnnl(wf__kctx *k, const mm_geom *g, dnnl_data_type_t dt, const void *a, const void *b,
                          void *c, const void *bias, dnnl_data_type_t bias_dt, int act, double alpha)
{
    mm_desc d;
    mm_describe(g, &d);
    mm_build_arg ba = {&d, dt, bias ? bias_dt : dnnl_data_type_undef, act, alpha};
    int64_t key[DN_KEY_MAX];
    int nk = 0;
    key[nk++] = 'M';
    key[nk++] = dt;
    key[nk++] = ba.bias_dt;
    key[nk++] = act;
    memcpy(&key[nk++], &alpha, sizeof alpha);
    key[nk++] = d.nd;
    for (int i = 0; i < d.nd; i++) {
        key[nk++] = d.ad[i], key[nk++] = d.as[i], key[nk++] = d.bd[i], key[nk++] = d.bs[i];
        key[nk++] = d.cd[i];
    }
    dn_prim *p;
    WF__TRY(dn_acquire(k, key, nk, mm_build, &ba, &p));
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    const dnnl_memory_desc_t *mds[4] = {&p->md[DN_SRC], &p->md[DN_WEI], &p->md[DN_DST],
                                        &p->md[DN_BIAS]};
    void *ptrs[4] = {(void *)a, (void *)b, c, (void *)bias};
    wf_status *s = dn_exec(k, p->prim, bias ? 4 : 3, ids, mds, ptrs, &p->scratch);
    dn_release(k, p);
    return s;
}

/* Plain C fallback for f64 and integers, parallel over output rows. Integers accumulate in uint64 so
 * overflow wraps like numpy's fixed-width arithmetic instead of being undefined. */
typedef struct mm_ref_arg {
    const mm_geom *g;
    const void *a, *b;
    void *c;
    int64_t a_bs[WF_MAX_RANK], b_bs[WF_MAX_RANK]; /* element strides of each batch dim, 0 where broadcast */
    int64_t sam, sak, sbk, sbn;
} mm_ref_arg;

static void mm_offsets(const mm_ref_arg *r, int64_t bi, int64_t *ao, int64_t *bo)
{
    int64_t oa = 0, ob = 0;
    for (int i = r->g->nb - 1; i >= 0; i--) {
        int64_t idx = bi % r->g->bat[i];
        bi /= r->g->bat[i];
        oa += idx * r->a_bs[i];
        ob += idx * r->b_bs[i];
    }
    *ao = oa;
    *bo = ob;
}

#define MM_REF(NAME, T, ACC)                                                                              \
    static void NAME(void *arg, int64_t r0, int64_t r1)                                                   \
    {                                                                                                     \
        const mm_ref_arg *r = arg;                                                                        \
        const T *a = r->a, *b = r->b;                                                                     \
        T *c = r->c;                                                                                      \
        int64_t m = r->g->m, n = r->g->n, kd = r->g->kdim;                                                \
        for (int64_t row = r0; row < r1; row++) {                                                         \
            int64_t ao, bo, i = row % m;                                                                  \
            mm_offsets(r, row / m, &ao, &bo);                                                             \
            const T *ap = a + ao + i * r->sam;                                                            \
            const T *bp = b + bo;                                                                         \
            for (int64_t j = 0; j < n; j++) {                                                             \
                ACC acc = 0;                                                                              \
                for (int64_t q = 0; q < kd; q++) acc += (ACC)ap[q * r->sak] * (ACC)bp[q * r->sbk + j * r->sbn]; \
                c[row * n + j] = (T)acc;                                                                  \
            }                                                                                             \
        }                                                                                                 \
    }

MM_REF(mm_ref_f64, double, double)
MM_REF(mm_ref_i32, int32_t, uint64_t)
MM_REF(mm_ref_i64, int64_t, uint64_t)

static void mm_ref(wf__kctx *k, const mm_geom *g, wf_dtype t, const void *a, const void *b, void *c)
{
    mm_ref_arg r = {.g = g, .a = a, .b = b, .c = c};
    int64_t amat = g->m * g->kdim, bmat = g->kdim * g->n, sa = amat, sb = bmat;
    for (int i = g->nb - 1; i >= 0; i--) {
        r.a_bs[i] = g->abat[i] == 1 ? 0 : sa;
        r.b_bs[i] = g->bbat[i] == 1 ? 0 : sb;
        sa *= g->abat[i];
        sb *= g->bbat[i];
    }
    r.sam = g->ta ? 1 : g->kdim;
    r.sak = g->ta ? g->m : 1;
    r.sbk = g->tb ? 1 : g->n;
    r.sbn = g->tb ? g->kdim : 1;
    int64_t rows = g->batch * g->m, work = g->n * g->kdim;
    int64_t grain = work > 0 ? 32768 / work + 1 : 1024;
    wf__range_fn fn = t == WF_F64 ? mm_ref_f64 : t == WF_I32 ? mm_ref_i32 : mm_ref_i64;
    wf__parallel_for(k, rows, grain, fn, &r);
}

/* Matrix product of a and b into a new output 0 of a's dtype, honouring a fused bias/activation. */
static wf_status *matmul_core(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, int ta, int tb,
                              const wf_tensor *bias, int act, double alpha, mm_geom *g, wf_tensor **outp)
{
    WF__TRY(mm_plan(k, a, b, ta, tb, g));
    wf_dtype t = a->dtype;
    if (b->dtype != t) {
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "A is %s but B is %s", wf_dtype_name(t), wf_dtype_name(b->dtype));
    }
    if (bias && (bias->dtype != t || bias->rank != 1 || bias->dims[0] != g->n))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "fused bias %s[%lld] does not match the output's %lld columns",
                             wf_dtype_name(bias->dtype), (long long)(bias->rank ? bias->dims[0] : 0), (long long)g->n);
    wf_tensor *o;
    WF__TRY(wf__kctx_output(k, 0, t, g->out_rank, g->out_dims, &o));
    *outp = o;
    int64_t rows = g->batch * g->m;
    if (rows == 0 || g->n == 0) return NULL;
    const void *bp = bias ? bias->data : NULL;
    if (g->kdim == 0) {
        memset(o->data, 0, o->bytes);
        epilogue(o->data, t, rows, g->n, 1, bp, act, alpha);
        return NULL;
    }
    if (t == WF_F64 || t == WF_I32 || t == WF_I64) {
        mm_ref(k, g, t, a->data, b->data, o->data);
        epilogue(o->data, t, rows, g->n, 1, bp, act, alpha);
        return NULL;
    }
    if (t == WF_F32) return mm_dnnl(k, g, dnnl_f32, a->data, b->data, o->data, bp, dnnl_f32, act, alpha);
    if (t == WF_BF16) {
        wf_status *s = mm_dnnl(k, g, dnnl_bf16, a->data, b->data, o->data, bp, dnnl_bf16, act, alpha);
        /* a CPU without bf16 support in oneDNN falls through to the f32 route below */
        if (!s || wf_status_code(s) != WF_UNIMPLEMENTED) return s;
        wf_status_free(s);
    }
    /* f16 (and bf16 without native support): convert through f32 and round once at the end */
    float *fa = NULL, *fb = NULL, *fbias = NULL, *fc = NULL;
    wf_status *s;
    if (!(s = to_f32(k, a->data, t, a->size, &fa)) && !(s = to_f32(k, b->data, t, b->size, &fb)) &&
        !(s = to_f32(k, bp, t, g->n, &fbias)) && !(s = alloc_f32(k, o->size, &fc)) &&
        !(s = mm_dnnl(k, g, dnnl_f32, fa, fb, fc, fbias, dnnl_f32, act, alpha)))
        wf__convert(fc, WF_F32, o->data, t, o->size);
    wf__aligned_free(fa);
    wf__aligned_free(fb);
    wf__aligned_free(fbias);
    wf__aligned_free(fc);
    return s;
}

static const wf_tensor *fused_bias(const wf__kctx *k)
{
    return k->fused_bias >= 0 && k->fused_bias < k->n_in ? k->in[k->fused_bias] : NULL;
}

static wf_status *k_matmul(wf__kctx *k)
{
    mm_geom g;
    wf_tensor *o;
    return matmul_core(k, k->in[0], k->in[1], (int)wf__attr_i(k->op, k->attrs, "transpose_a"),
                       (int)wf__attr_i(k->op, k->attrs, "transpose_b"), fused_bias(k), k->fused_act, k->fused_alpha,
                       &g, &o);
}

/* ---- Gemm: the product through the MatMul path, then alpha, beta*C, bias and act in one pass ------- */

static wf_status *k_gemm(wf__kctx *k)
{
    /* a fused bias may sit at index 2 when C is absent */
    const wf_tensor *a = k->in[0], *b = k->in[1], *c = k->n_in > 2 && k->fused_bias != 2 ? k->in[2] : NULL;
    char sa[160], sb[160];
    if (a->rank != 2 || b->rank != 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s must both be 2-D", wf__shape_str(a->rank, a->dims, sa),
                             wf__shape_str(b->rank, b->dims, sb));
    double alpha = wf__attr_f(k->op, k->attrs, "alpha"), beta = wf__attr_f(k->op, k->attrs, "beta");
    const wf_tensor *bias = fused_bias(k);
    wf_dtype t = a->dtype;
    bool lowp = t == WF_F16 || t == WF_BF16;
    /* f16/bf16 go through f32 end to end so alpha, beta*C and the bias round only once */
    wf_tensor *fa = NULL, *fb = NULL;
    wf_status *s = NULL;
    if (lowp) {
        if ((s = wf__tensor_alloc(WF_F32, 2, a->dims, "a Gemm f32 copy", &fa)) ||
            (s = wf__tensor_alloc(WF_F32, 2, b->dims, "a Gemm f32 copy", &fb)))
            goto done;
        wf__convert(a->data, t, fa->data, WF_F32, a->size);
        wf__convert(b->data, t, fb->data, WF_F32, b->size);
    }
    mm_geom g;
    wf_tensor *o;
    if ((s = matmul_core(k, lowp ? fa : a, lowp ? fb : b, (int)wf__attr_i(k->op, k->attrs, "transA"),
                         (int)wf__attr_i(k->op, k->attrs, "transB"), NULL, WF__ACT_NONE, 0, &g, &o)))
        goto done;
    int64_t m = g.m, n = g.n;
    if (c && !(c->rank <= 2 && (c->rank < 1 || c->dims[c->rank - 1] == n || c->dims[c->rank - 1] == 1) &&
               (c->rank < 2 || c->dims[0] == m || c->dims[0] == 1))) {
        s = wf__kctx_fail(k, WF_INVALID_ARGUMENT, "C %s does not broadcast to the output [%lld,%lld]",
                          wf__shape_str(c->rank, c->dims, sa), (long long)m, (long long)n);
        goto done;
    }
    if (bias && (bias->rank != 1 || bias->dims[0] != n)) {
        s = wf__kctx_fail(k, WF_INVALID_ARGUMENT, "fused bias does not match the output's %lld columns", (long long)n);
        goto done;
    }
    int64_t cs0 = c && c->rank == 2 && c->dims[0] != 1 ? c->dims[1] : 0;
    int64_t cs1 = c && c->rank >= 1 && c->dims[c->rank - 1] != 1 ? 1 : 0;
    wf_dtype ot = o->dtype;
    if (ot == WF_F32 && (!c || c->dtype == WF_F32) && (!bias || bias->dtype == WF_F32)) {
        float *y = o->data;
        const float *cp = c ? c->data : NULL, *bp = bias ? bias->data : NULL;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float v = (float)alpha * y[i * n + j];
                if (cp) v += (float)beta * cp[i * cs0 + j * cs1];
                if (bp) v += bp[j];
                y[i * n + j] = act_f(k->fused_act, (float)k->fused_alpha, v);
            }
    } else {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                int64_t idx = i * n + j;
                if (wf__dtype_is_int(ot)) {
                    int64_t v = (int64_t)((double)wf__load_i64(o->data, ot, idx) * alpha);
                    if (c) v += (int64_t)(beta * (double)wf__load_i64(c->data, c->dtype, i * cs0 + j * cs1));
                    if (bias) v += wf__load_i64(bias->data, bias->dtype, j);
                    if (k->fused_act == WF__ACT_RELU && v < 0) v = 0;
                    if (ot == WF_I32) ((int32_t *)o->data)[idx] = (int32_t)v;
                    else ((int64_t *)o->data)[idx] = v;
                    continue;
                }
                double v = alpha * wf__load_f64(o->data, ot, idx);
                if (c) v += beta * wf__load_f64(c->data, c->dtype, i * cs0 + j * cs1);
                if (bias) v += wf__load_f64(bias->data, bias->dtype, j);
                wf__store_f64(o->data, ot, idx, act_d(k->fused_act, k->fused_alpha, v));
            }
    }
    if (lowp) {
        /* o is the f32 result matmul_core left in output 0; replace it by the node's dtype */
        wf_tensor *y, *f = wf_tensor_ref(o);
        if (!(s = wf__kctx_output(k, 0, t, 2, f->dims, &y))) wf__convert(f->data, WF_F32, y->data, t, f->size);
        wf_tensor_free(f);
    }
done:
    wf_tensor_free(fa);
    wf_tensor_free(fb);
    return s;
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

/* ---- Conv2D ------------------------------------------------------------------------------------ */

typedef struct conv_geom {
    int64_t n, c, h, w, oc, g, kh, kw;
    wf__nn_window win;
} conv_geom;

/* The op's own bias input B; a fused bias may have been appended at index 2 when B is absent. */
static const wf_tensor *conv_own_bias(const wf__kctx *k)
{
    return k->n_in > 2 && k->fused_bias != 2 ? k->in[2] : NULL;
}

static wf_status *conv_plan(wf__kctx *k, bool transposed, conv_geom *g)
{
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = conv_own_bias(k);
    char sx[160], sw[160];
    memset(g, 0, sizeof *g);
    if (x->rank != 4 || w->rank != 4)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s and W %s must be 4-D", wf__shape_str(x->rank, x->dims, sx),
                             wf__shape_str(w->rank, w->dims, sw));
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X is %s but W is %s", wf_dtype_name(x->dtype),
                             wf_dtype_name(w->dtype));
    g->n = x->dims[0], g->c = x->dims[1], g->h = x->dims[2], g->w = x->dims[3];
    g->g = wf__attr_i(k->op, k->attrs, "group");
    g->kh = w->dims[2], g->kw = w->dims[3];
    bool bad = g->g < 1 || g->c % g->g;
    if (!transposed) {
        g->oc = w->dims[0];
        bad = bad || g->oc % g->g || w->dims[1] * g->g != g->c;
    } else {
        g->oc = w->dims[1] * g->g;
        bad = bad || w->dims[0] != g->c;
    }
    if (bad)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s and group %lld do not match",
                             wf__shape_str(x->rank, x->dims, sx), wf__shape_str(w->rank, w->dims, sw), (long long)g->g);
    if (b && (b->rank != 1 || b->dims[0] != g->oc))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "B must be 1-D with %lld elements", (long long)g->oc);
    const wf_tensor *fb = transposed ? NULL : fused_bias(k);
    if (fb && (fb->rank != 1 || fb->dims[0] != g->oc || fb->dtype != x->dtype))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "fused bias must be 1-D %s with %lld elements",
                             wf_dtype_name(x->dtype), (long long)g->oc);
    char err[256];
    int64_t in_hw[2] = {g->h, g->w}, wk[2] = {g->kh, g->kw};
    if (wf__nn_window_resolve(k->op, k->attrs, transposed ? WF__WIN_CONVT : WF__WIN_CONV, in_hw, wk, &g->win, err,
                              sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s: %s", wf__shape_str(x->rank, x->dims, sx),
                             wf__shape_str(w->rank, w->dims, sw), err);
    return NULL;
}

typedef struct conv_build_arg {
    const conv_geom *g;
    dnnl_data_type_t dt;
    bool bias;
    int act;
    double alpha;
} conv_build_arg;

static wf_status *conv_build(wf__kctx *k, void *arg, dnnl_engine_t eng, dn_prim *p)
{
    const conv_build_arg *ca = arg;
    const conv_geom *g = ca->g;
    dnnl_dims_t sd = {g->n, g->c, g->h, g->w}, dd = {g->n, g->oc, g->win.out[0], g->win.out[1]}, bd = {g->oc};
    dnnl_dims_t wd = {g->g, g->oc / g->g, g->c / g->g, g->kh, g->kw};
    int wnd = 5;
    if (g->g == 1) {
        wnd = 4;
        memmove(wd, wd + 1, 4 * sizeof wd[0]);
    }
    dnnl_dims_t strides = {g->win.s[0], g->win.s[1]}, dil = {g->win.d[0] - 1, g->win.d[1] - 1};
    dnnl_dims_t pl = {g->win.pb[0], g->win.pb[1]}, pr = {g->win.pe[0], g->win.pe[1]};
    dnnl_memory_desc_t wany;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL, rattr = NULL;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_status_t st;
    const char *what = "convolution memory descriptor";
    if ((st = dnnl_memory_desc_init_by_tag(&p->md[DN_SRC], 4, sd, ca->dt, dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[DN_DST], 4, dd, ca->dt, dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[DN_WEI], wnd, wd, ca->dt, wnd == 5 ? dnnl_abcde : dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&wany, wnd, wd, ca->dt, dnnl_format_tag_any)) ||
        (ca->bias && (st = dnnl_memory_desc_init_by_tag(&p->md[DN_BIAS], 1, bd, ca->dt, dnnl_a))))
        goto fail;
    what = "convolution descriptor";
    if ((st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                         &p->md[DN_SRC], &wany, ca->bias ? &p->md[DN_BIAS] : NULL,
                                                         &p->md[DN_DST], strides, dil, pl, pr)))
        goto fail;
    what = "convolution post-op";
    if ((st = dn_act_attr(ca->act, ca->alpha, &attr))) goto fail;
    what = "convolution primitive descriptor";
    if ((st = dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL))) goto fail;
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->md[DN_WEI_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (!dnnl_memory_desc_equal(&p->md[DN_WEI_PRIM], &p->md[DN_WEI])) {
        what = "weight reorder";
        /* the reorder gets its own attributes: user scratchpad, but never the activation */
        if ((st = dn_act_attr(WF__ACT_NONE, 0, &rattr)) ||
            (st = dnnl_reorder_primitive_desc_create(&rpd, &p->md[DN_WEI], eng, &p->md[DN_WEI_PRIM], eng, rattr)) ||
            (st = dnnl_primitive_create(&p->wreorder, rpd)))
            goto fail;
        p->wscratch = *dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0);
        p->wbytes = dnnl_memory_desc_get_size(&p->md[DN_WEI_PRIM]);
    }
    what = "convolution primitive";
    st = dnnl_primitive_create(&p->prim, pd);
fail:
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (rattr) dnnl_primitive_attr_destroy(rattr);
    return st == dnnl_success ? NULL : dn_fail(k, st, what);
}

/* The weights are reordered into the primitive's preferred layout on every run: correct whatever the
 * weights are (fed or variable); caching them by tensor identity is left for when variables exist. */
static wf_status *conv_dnnl(wf__kctx *k, const conv_geom *g, dnnl_data_type_t dt, const void *x, const void *w,
                            const void *bias, void *y, int act, double alpha)
{
    conv_build_arg ca = {g, dt, bias != NULL, act, alpha};
    int64_t key[DN_KEY_MAX];
    int nk = 0;
    key[nk++] = 'C';
    key[nk++] = dt;
    key[nk++] = bias != NULL;
    key[nk++] = act;
    memcpy(&key[nk++], &alpha, sizeof alpha);
    const int64_t geo[] = {g->n, g->c, g->h, g->w, g->oc, g->g, g->kh, g->kw};
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) key[nk++] = geo[i];
    memcpy(&key[nk], &g->win, sizeof g->win);
    nk += (int)(sizeof g->win / sizeof(int64_t));
    dn_prim *p;
    WF__TRY(dn_acquire(k, key, nk, conv_build, &ca, &p));
    wf_status *s = NULL;
    void *wbuf = NULL;
    if (p->wreorder) {
        wbuf = wf__aligned_alloc(p->wbytes ? p->wbytes : 1, WF__ALIGN);
        if (!wbuf) {
            s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for reordered weights on CPU:0",
                              p->wbytes);
            goto done;
        }
        int rids[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
        const dnnl_memory_desc_t *rmds[2] = {&p->md[DN_WEI], &p->md[DN_WEI_PRIM]};
        void *rptrs[2] = {(void *)w, wbuf};
        if ((s = dn_exec(k, p->wreorder, 2, rids, rmds, rptrs, &p->wscratch))) goto done;
    }
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    const dnnl_memory_desc_t *mds[4] = {&p->md[DN_SRC], &p->md[wbuf ? DN_WEI_PRIM : DN_WEI], &p->md[DN_DST],
                                        &p->md[DN_BIAS]};
    void *ptrs[4] = {(void *)x, wbuf ? wbuf : (void *)w, y, (void *)bias};
    s = dn_exec(k, p->prim, bias ? 4 : 3, ids, mds, ptrs, &p->scratch);
done:
    wf__aligned_free(wbuf);
    dn_release(k, p);
    return s;
}

typedef struct conv_ref_arg {
    const conv_geom *g;
    const double *x, *w, *b;
    double *y;
} conv_ref_arg;

/* f64 convolution, one output plane (n, oc) per step */
WF__VEC static void conv_ref_f64(void *arg, int64_t p0, int64_t p1)
{
    const conv_ref_arg *r = arg;
    const conv_geom *g = r->g;
    const wf__nn_window *wn = &g->win;
    int64_t oh = wn->out[0], ow = wn->out[1], icg = g->c / g->g, ocg = g->oc / g->g;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / g->oc, o = p % g->oc, grp = o / ocg;
        double *y = r->y + p * oh * ow;
        for (int64_t i = 0; i < oh * ow; i++) y[i] = r->b ? r->b[o] : 0.0;
        for (int64_t j = 0; j < icg; j++) {
            const double *xp = r->x + (n * g->c + grp * icg + j) * g->h * g->w;
            const double *wp = r->w + (o * icg + j) * g->kh * g->kw;
            for (int64_t a = 0; a < g->kh; a++)
                for (int64_t bb = 0; bb < g->kw; bb++) {
                    double wv = wp[a * g->kw + bb];
                    for (int64_t yh = 0; yh < oh; yh++) {
                        int64_t ih = yh * wn->s[0] - wn->pb[0] + a * wn->d[0];
                        if (ih < 0 || ih >= g->h) continue;
                        for (int64_t yw = 0; yw < ow; yw++) {
                            int64_t iw = yw * wn->s[1] - wn->pb[1] + bb * wn->d[1];
                            if (iw >= 0 && iw < g->w) y[yh * ow + yw] += wv * xp[ih * g->w + iw];
                        }
                    }
                }
        }
    }
}

static wf_status *k_conv(wf__kctx *k)
{
    conv_geom g;
    WF__TRY(conv_plan(k, false, &g));
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = conv_own_bias(k), *fb = fused_bias(k);
    wf_dtype t = x->dtype;
    int64_t od[4] = {g.n, g.oc, g.win.out[0], g.win.out[1]};
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, t, 4, od, &y));
    if (!y->size) return NULL;
    /* B and a fused bias together become one bias vector */
    void *bsum = NULL;
    const void *bias = b ? b->data : fb ? fb->data : NULL;
    if (b && fb) {
        if (!(bsum = wf__aligned_alloc((size_t)g.oc * wf_dtype_size(t), WF__ALIGN)))
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating a bias on CPU:0");
        for (int64_t i = 0; i < g.oc; i++)
            wf__store_f64(bsum, t, i, wf__load_f64(b->data, t, i) + wf__load_f64(fb->data, t, i));
        bias = bsum;
    }
    wf_status *s = NULL;
    int act = k->fused_act;
    if (g.c == 0) {
        /* no input channels: the output is the bias */
        memset(y->data, 0, y->bytes);
        epilogue(y->data, t, g.n, g.oc, od[2] * od[3], bias, act, k->fused_alpha);
    } else if (t == WF_F64) {
        conv_ref_arg r = {&g, x->data, w->data, bias, y->data};
        int64_t per = od[2] * od[3] * (g.c / g.g) * g.kh * g.kw;
        wf__parallel_for(k, g.n * g.oc, 32768 / (per + 1) + 1, conv_ref_f64, &r);
        epilogue(y->data, t, g.n, g.oc, od[2] * od[3], NULL, act, k->fused_alpha);
    } else {
        if (t == WF_F32 || t == WF_BF16) {
            s = conv_dnnl(k, &g, dn_dtype(t), x->data, w->data, bias, y->data, act, k->fused_alpha);
            if (t == WF_F32 || !s || wf_status_code(s) != WF_UNIMPLEMENTED) goto done;
            wf_status_free(s);
        }
        float *fx = NULL, *fw = NULL, *fbias = NULL, *fy = NULL;
        if (!(s = to_f32(k, x->data, t, x->size, &fx)) && !(s = to_f32(k, w->data, t, w->size, &fw)) &&
            !(s = to_f32(k, bias, t, g.oc, &fbias)) && !(s = alloc_f32(k, y->size, &fy)) &&
            !(s = conv_dnnl(k, &g, dnnl_f32, fx, fw, fbias, fy, act, k->fused_alpha)))
            wf__convert(fy, WF_F32, y->data, t, y->size);
        wf__aligned_free(fx);
        wf__aligned_free(fw);
        wf__aligned_free(fbias);
        wf__aligned_free(fy);
    }
done:
    wf__aligned_free(bsum);
    return s;
}

/* ---- ConvTranspose2D: direct scatter, one output plane per step so planes never race -------------- */

typedef struct convt_arg {
    const conv_geom *g;
    const void *x, *w, *b;
    void *y;
} convt_arg;

#define CONVT_LOOP(NAME, T)                                                                                \
    WF__VEC static void NAME(void *arg, int64_t p0, int64_t p1)                                            \
    {                                                                                                      \
        const convt_arg *r = arg;                                                                          \
        const conv_geom *g = r->g;                                                                         \
        const wf__nn_window *wn = &g->win;                                                                 \
        const T *X = r->x, *W = r->w, *B = r->b;                                                           \
        int64_t oh = wn->out[0], ow = wn->out[1], icg = g->c / g->g, ocg = g->oc / g->g;                   \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            int64_t n = p / g->oc, o = p % g->oc, grp = o / ocg, oo = o % ocg;                             \
            T *y = (T *)r->y + p * oh * ow;                                                                \
            for (int64_t i = 0; i < oh * ow; i++) y[i] = B ? B[o] : (T)0;                                  \
            for (int64_t j = 0; j < icg; j++) {                                                            \
                int64_t ic = grp * icg + j;                                                                \
                const T *xp = X + (n * g->c + ic) * g->h * g->w;                                           \
                const T *wp = W + (ic * ocg + oo) * g->kh * g->kw;                                         \
                for (int64_t a = 0; a < g->kh; a++)                                                        \
                    for (int64_t bb = 0; bb < g->kw; bb++) {                                               \
                        T wv = wp[a * g->kw + bb];                                                         \
                        for (int64_t ih = 0; ih < g->h; ih++) {                                            \
                            int64_t yh = ih * wn->s[0] - wn->pb[0] + a * wn->d[0];                         \
                            if (yh < 0 || yh >= oh) continue;                                              \
                            for (int64_t iw = 0; iw < g->w; iw++) {                                        \
                                int64_t yw = iw * wn->s[1] - wn->pb[1] + bb * wn->d[1];                    \
                                if (yw >= 0 && yw < ow) y[yh * ow + yw] += wv * xp[ih * g->w + iw];        \
                            }                                                                              \
                        }                                                                                  \
                    }                                                                                      \
            }                                                                                              \
        }                                                                                                  \
    }
CONVT_LOOP(convt_f32, float)
CONVT_LOOP(convt_f64, double)

static wf_status *k_convt(wf__kctx *k)
{
    conv_geom g;
    WF__TRY(conv_plan(k, true, &g));
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = conv_own_bias(k);
    wf_dtype t = x->dtype;
    int64_t od[4] = {g.n, g.oc, g.win.out[0], g.win.out[1]};
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, t, 4, od, &y));
    if (!y->size) return NULL;
    int64_t per = (g.c / g.g) * g.h * g.w * g.kh * g.kw;
    int64_t grain = 32768 / (per + 1) + 1;
    if (t == WF_F32 || t == WF_F64) {
        convt_arg r = {&g, x->data, w->data, b ? b->data : NULL, y->data};
        wf__parallel_for(k, g.n * g.oc, grain, t == WF_F32 ? convt_f32 : convt_f64, &r);
        return NULL;
    }
    float *fx = NULL, *fw = NULL, *fb = NULL, *fy = NULL;
    wf_status *s;
    if (!(s = to_f32(k, x->data, t, x->size, &fx)) && !(s = to_f32(k, w->data, t, w->size, &fw)) &&
        !(s = to_f32(k, b ? b->data : NULL, t, g.oc, &fb)) && !(s = alloc_f32(k, y->size, &fy))) {
        convt_arg r = {&g, fx, fw, fb, fy};
        wf__parallel_for(k, g.n * g.oc, grain, convt_f32, &r);
        wf__convert(fy, WF_F32, y->data, t, y->size);
    }
    wf__aligned_free(fx);
    wf__aligned_free(fw);
    wf__aligned_free(fb);
    wf__aligned_free(fy);
    return s;
}

/* ---- MaxPool2D / AvgPool2D: direct loops -------------------------------------------------------------
 * Written out rather than through oneDNN pooling because ONNX's ceil_mode windows and count_include_pad
 * divisor (which counts the padding but not the ceil overhang) do not map onto oneDNN's algorithms. */

typedef struct pool_arg {
    const wf__nn_window *wn;
    int64_t h, w;
    const void *x;
    void *y;
    bool is_max, include_pad;
} pool_arg;

#define POOL_LOOP(NAME, T)                                                                                 \
    WF__VEC static void NAME(void *arg, int64_t p0, int64_t p1)                                            \
    {                                                                                                      \
        const pool_arg *r = arg;                                                                           \
        const wf__nn_window *wn = r->wn;                                                                   \
        int64_t oh = wn->out[0], ow = wn->out[1], H = r->h, W = r->w;                                      \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            const T *x = (const T *)r->x + p * H * W;                                                      \
            T *y = (T *)r->y + p * oh * ow;                                                                \
            for (int64_t yh = 0; yh < oh; yh++)                                                            \
                for (int64_t yw = 0; yw < ow; yw++) {                                                      \
                    double acc = r->is_max ? -INFINITY : 0.0;                                              \
                    int64_t n_valid = 0, n_pad = 0;                                                        \
                    for (int64_t a = 0; a < wn->k[0]; a++) {                                               \
                        int64_t ih = yh * wn->s[0] - wn->pb[0] + a * wn->d[0];                             \
                        if (ih < -wn->pb[0] || ih >= H + wn->pe[0]) continue;                              \
                        for (int64_t b = 0; b < wn->k[1]; b++) {                                           \
                            int64_t iw = yw * wn->s[1] - wn->pb[1] + b * wn->d[1];                         \
                            if (iw < -wn->pb[1] || iw >= W + wn->pe[1]) continue;                          \
                            n_pad++;                                                                       \
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;                          \
                            n_valid++;                                                                     \
                            double v = (double)x[ih * W + iw];                                             \
                            if (r->is_max) {                                                               \
                                if (v > acc || isnan(v)) acc = isnan(acc) ? acc : v;                       \
                            } else {                                                                       \
                                acc += v;                                                                  \
                            }                                                                              \
                        }                                                                                  \
                    }                                                                                      \
                    if (!r->is_max) {                                                                      \
                        int64_t div = r->include_pad ? n_pad : n_valid;                                    \
                        acc = div ? acc / (double)div : NAN;                                               \
                    }                                                                                      \
                    y[yh * ow + yw] = (T)acc;                                                              \
                }                                                                                          \
        }                                                                                                  \
    }
POOL_LOOP(pool_f32, float)
POOL_LOOP(pool_f64, double)

static wf_status *k_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char sx[160], err[256];
    if (x->rank != 4) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s must be 4-D", wf__shape_str(x->rank, x->dims, sx));
    wf__nn_window wn;
    int64_t in_hw[2] = {x->dims[2], x->dims[3]};
    if (wf__nn_window_resolve(k->op, k->attrs, WF__WIN_POOL, in_hw, NULL, &wn, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s: %s", wf__shape_str(x->rank, x->dims, sx), err);
    int64_t od[4] = {x->dims[0], x->dims[1], wn.out[0], wn.out[1]};
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, 4, od, &y));
    if (!y->size) return NULL;
    pool_arg r = {&wn, x->dims[2], x->dims[3], x->data, y->data, !strcmp(k->op->name, "MaxPool2D"), false};
    if (!r.is_max) r.include_pad = wf__attr_i(k->op, k->attrs, "count_include_pad") != 0;
    int64_t planes = od[0] * od[1], per = od[2] * od[3] * wn.k[0] * wn.k[1];
    int64_t grain = 32768 / (per + 1) + 1;
    if (x->dtype == WF_F32 || x->dtype == WF_F64) {
        wf__parallel_for(k, planes, grain, x->dtype == WF_F32 ? pool_f32 : pool_f64, &r);
        return NULL;
    }
    float *fx = NULL, *fy = NULL;
    wf_status *s;
    if (!(s = to_f32(k, x->data, x->dtype, x->size, &fx)) && !(s = alloc_f32(k, y->size, &fy))) {
        r.x = fx;
        r.y = fy;
        wf__parallel_for(k, planes, grain, pool_f32, &r);
        wf__convert(fy, WF_F32, y->data, x->dtype, y->size);
    }
    wf__aligned_free(fx);
    wf__aligned_free(fy);
    return s;
}

/* ---- GlobalAvgPool ------------------------------------------------------------------------------- */

typedef struct gap_arg {
    const void *x;
    void *y;
    int64_t inner;
    wf_dtype t;
} gap_arg;

static void gap_range(void *arg, int64_t p0, int64_t p1)
{
    const gap_arg *r = arg;
    for (int64_t p = p0; p < p1; p++) {
        double acc = 0;
        if (r->t == WF_F32) {
            const float *x = (const float *)r->x + p * r->inner;
            for (int64_t i = 0; i < r->inner; i++) acc += x[i];
        } else {
            for (int64_t i = 0; i < r->inner; i++) acc += wf__load_f64(r->x, r->t, p * r->inner + i);
        }
        wf__store_f64(r->y, r->t, p, r->inner ? acc / (double)r->inner : NAN);
    }
}

static wf_status *k_global_avg_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char sx[160];
    if (x->rank < 3)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s must have rank >= 3", wf__shape_str(x->rank, x->dims, sx));
    int64_t od[WF_MAX_RANK], inner = 1;
    for (int i = 0; i < x->rank; i++) {
        od[i] = i < 2 ? x->dims[i] : 1;
        if (i >= 2) inner *= x->dims[i];
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, od, &y));
    gap_arg r = {x->data, y->data, inner, x->dtype};
    wf__parallel_for(k, y->size, 32768 / (inner + 1) + 1, gap_range, &r);
    return NULL;
}

/* ---- kernel table -------------------------------------------------------------------------------- */

const wf__kernel_def wf__cpu_kernels_nn[] = {
    {"MatMul", "CPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64), 0, k_matmul, dn_free_state,
     WF__K_EPILOGUE},
    {"Gemm", "CPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64), 0, k_gemm, dn_free_state,
     WF__K_EPILOGUE},
    {"BiasAdd", "CPU", WF__DT_NUMERIC, 0, k_bias_add, NULL, WF__K_INPLACE},
    {"Conv2D", "CPU", WF__DT_FLOATS, 0, k_conv, dn_free_state, WF__K_EPILOGUE},
    {"ConvTranspose2D", "CPU", WF__DT_FLOATS, 0, k_convt, NULL, 0},
    {"MaxPool2D", "CPU", WF__DT_FLOATS, 0, k_pool, NULL, 0},
    {"AvgPool2D", "CPU", WF__DT_FLOATS, 0, k_pool, NULL, 0},
    {"GlobalAvgPool", "CPU", WF__DT_FLOATS, 0, k_global_avg_pool, NULL, 0},
    {0},
};
