/*
 * MatMul and Gemm on the CPU: f32 and bf16 through a cached oneDNN matmul primitive with the bias and
 * activation as post-ops, or for a constant f32 B through oneDNN's packed GEMM (see "The packed GEMM");
 * f16 converts through f32; f64 and integers through a plain C loop.
 */
#include "k_dnnl.h"
#include "ops/kutil_matmul.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- MatMul -------------------------------------------------------------------------------------- */

#define MM_MAXND (WF_MAX_RANK + 2)

typedef wf__ku_mm mm_geom;

/* Resolves numpy matmul shapes of the actual inputs (they may differ from the planned ones). */
static wf_status *mm_plan(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, int ta, int tb, mm_geom *g)
{
    memset(g, 0, sizeof *g);
    char sa[160], sb[160];
    if (a->rank == 0 || b->rank == 0)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "operands must have rank >= 1, got A %s%s and B %s%s",
                             wf_dtype_name(a->dtype), wf__shape_str(a->rank, a->dims, sa),
                             wf_dtype_name(b->dtype), wf__shape_str(b->rank, b->dims, sb));
    switch (wf__ku_mm_plan(a->rank, a->dims, b->rank, b->dims, ta, tb, g)) {
    case WF__KU_MM_INNER:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "A %s%s and B %s%s have incompatible inner dims %lld and %lld",
                             wf_dtype_name(a->dtype), wf__shape_str(a->rank, a->dims, sa), wf_dtype_name(b->dtype),
                             wf__shape_str(b->rank, b->dims, sb), (long long)g->ka, (long long)g->kb);
    case WF__KU_MM_BATCH:
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "A %s%s and B %s%s have batch dims that do not broadcast",
                             wf_dtype_name(a->dtype), wf__shape_str(a->rank, a->dims, sa),
                             wf_dtype_name(b->dtype), wf__shape_str(b->rank, b->dims, sb));
    default: break;
    }
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
    bool packed; /* B is a constant 2-D matrix: the primitive picks its layout, reordered once per version */
    bool sum;    /* C holds a residual, to which the product is added (before act) */
    bool gpack;  /* the packed GEMM may take it (mm_gpack_wanted), where the primitive would take B plain */
} mm_build_arg;

/*
 * The packed GEMM. oneDNN 2.x's f32 matmul without AVX-512 (gemm:jit) copies B into its panel layout
 * inside every call, for a constant B too (the plain layout choice below only picks the faster copy).
 * oneDNN's packed-GEMM entry points (src/cpu/gemm/gemm_pack.hpp: sgemm_pack_get_size, sgemm_pack and
 * sgemm_compute, BLAS's column-major convention and MKL's pack/compute semantics, 'P' marking the packed
 * operand) make that copy once: libdnnl exports them with C++ names but no public header, so they are
 * declared here by their mangled names as weak symbols; a libdnnl without them (another version) leaves
 * them NULL and the primitive runs as before. Row-major C = A B is column-major C^T = B^T A^T, so the
 * constant B is BLAS's A, packed once per version into the node's weight cache (wf__dn_weights_with).
 * Measured on Zen 3, 2 threads, the best of 200 calls (dnnl_sgemm with B row-major / column-major against
 * the packed compute, us): M 128, K 256, N 1024 (BERT's FFN up) 408 / 354 against 345; K 1024, N 256
 * 372 / 379 against 349; 256 x 256 91 / 89 against 86; M 8, K 128, N 512 16.3 / 12.7 against 9.8; but M 1,
 * K 1024, N 1000 (a classifier's GEMV) 40.7 / 35.5 against 37.6, so M 1 keeps the primitive. The results
 * are the same bits as dnnl_sgemm's (the same kernels). The bias is written into C first (C += bias
 * with a residual there) and added by beta 1, so it is summed before the product rather than after
 * (within an ulp of the primitive's order); activations not in the primitive run as the pass after it,
 * as before, and the others (Sigmoid, Tanh, LeakyRelu) keep the primitive. WEFT_CPU_GEMM_PACK=0 turns it
 * off (tests, A/B measurements).
 */
typedef int64_t mm_dim;
extern int mm_gp_size(const char *id, const char *ta, const char *tb, const mm_dim *m, const mm_dim *n,
                      const mm_dim *k, const mm_dim *lda, const mm_dim *ldb, size_t *size, bool *pack)
    __asm__("_ZN4dnnl4impl3cpu19sgemm_pack_get_sizeEPKcS3_S3_PKlS5_S5_S5_S5_PmPb") __attribute__((weak));
extern int mm_gp_pack(const char *id, const char *ta, const char *tb, const mm_dim *m, const mm_dim *n,
                      const mm_dim *k, const mm_dim *lda, const mm_dim *ldb, const float *src, float *dst)
    __asm__("_ZN4dnnl4impl3cpu10sgemm_packEPKcS3_S3_PKlS5_S5_S5_S5_PKfPf") __attribute__((weak));
extern int mm_gp_compute(const char *ta, const char *tb, const mm_dim *m, const mm_dim *n, const mm_dim *k,
                         const float *a, const mm_dim *lda, const float *b, const mm_dim *ldb, const float *beta,
                         float *c, const mm_dim *ldc)
    __asm__("_ZN4dnnl4impl3cpu13sgemm_computeEPKcS3_PKlS5_S5_PKfS5_S7_S5_S7_PfS5_") __attribute__((weak));

static atomic_int_least64_t g_gpack_runs;

int64_t wf__mm_gpack_runs(void) { return atomic_load(&g_gpack_runs); }

bool wf__mm_gpack_linked(void) { return mm_gp_size && mm_gp_pack && mm_gp_compute; }

size_t wf__sgemm_w_bytes(int64_t m, int64_t n, int64_t k)
{
    if (!wf__mm_gpack_linked() || m < 1 || n < 1 || k < 1) return 0;
    mm_dim M = m, N = n, K = k, lda = k, ldb = k;
    size_t bytes = 0;
    bool pack = false;
    return mm_gp_size("A", "T", "N", &M, &N, &K, &lda, &ldb, &bytes, &pack) ? 0 : bytes;
}

int wf__sgemm_w_pack(int64_t m, int64_t n, int64_t k, const float *w, void *dst)
{
    mm_dim M = m, N = n, K = k, lda = k, ldb = k;
    return mm_gp_pack("A", "T", "N", &M, &N, &K, &lda, &ldb, w, dst);
}

int wf__sgemm_w_compute(int64_t m, int64_t n, int64_t k, const void *packed, const float *b, float *c)
{
    mm_dim M = m, N = n, K = k, lda = k, ldb = k, ldc = m;
    float beta = 0.0f;
    return mm_gp_compute("P", "N", &M, &N, &K, packed, &lda, b, &ldb, &beta, c, &ldc);
}

/* The column-major call for d (2-D, row-major C): C^T [N, M] = B^T [N, K] A^T [K, M]. */
typedef struct mm_gp_geom {
    mm_dim m, n, k, lda, ldb, ldc;
    char ta[2], tb[2];
} mm_gp_geom;

/* false when a stride pattern is not one BLAS takes (the primitive runs instead) */
static bool mm_gp_geometry(const mm_desc *d, mm_gp_geom *g)
{
    *g = (mm_gp_geom){.m = d->bd[1], .n = d->ad[0], .k = d->ad[1], .ldc = d->cs[0], .ta = "N", .tb = "N"};
    if (d->bs[1] == 1 && d->bs[0] >= g->m) g->lda = d->bs[0]; /* B row-major: B^T column-major */
    else if (d->bs[0] == 1 && d->bs[1] >= g->k) g->lda = d->bs[1], g->ta[0] = 'T';
    else return false;
    if (d->as[1] == 1 && d->as[0] >= g->k) g->ldb = d->as[0];
    else if (d->as[0] == 1 && d->as[1] >= g->n) g->ldb = d->as[1], g->tb[0] = 'T';
    else return false;
    return d->cs[1] == 1 && g->ldc >= g->m;
}

static bool mm_gpack_wanted(const mm_desc *d, dnnl_data_type_t dt, bool packed, int act, double alpha)
{
    if (!wf__mm_gpack_linked() || !packed || dt != dnnl_f32 || d->nd != 2) return false;
    if (act != WF__ACT_NONE && wf__dn_act_in_prim(act, alpha)) return false;
    if (d->ad[0] < 2 || d->ad[1] < 2 || d->bd[1] < 2) return false;
    const char *e = getenv("WEFT_CPU_GEMM_PACK");
    mm_gp_geom g;
    return !(e && !strcmp(e, "0")) && mm_gp_geometry(d, &g);
}

/* The packed B's bytes for the thread count in effect (0: the call is refused). */
static size_t mm_gp_bytes(const mm_desc *d)
{
    mm_gp_geom g;
    size_t bytes = 0;
    bool pack = false;
    if (!mm_gp_geometry(d, &g) || mm_gp_size("A", g.ta, g.tb, &g.m, &g.n, &g.k, &g.lda, &g.ldb, &bytes, &pack))
        return 0;
    return bytes;
}

typedef struct mm_gp_arg {
    const mm_desc *d;
    const wf__dn_prim *p;
    const float *b;
} mm_gp_arg;

/* Packs B into dst (p->gpack bytes) on the thread count the size was taken for (the primitive's build) */
static wf_status *mm_gp_pack_into(wf__kctx *k, void *arg, void *dst)
{
    const mm_gp_arg *a = arg;
    mm_gp_geom g;
    mm_gp_geometry(a->d, &g);
    omp_set_num_threads(a->p->threads);
    size_t bytes = mm_gp_bytes(a->d);
    int st = bytes && bytes <= a->p->gpack ? mm_gp_pack("A", g.ta, g.tb, &g.m, &g.n, &g.k, &g.lda, &g.ldb, a->b, dst) : -1;
    omp_set_num_threads(1);
    if (st)
        return wf__kctx_fail(k, WF_INTERNAL, "oneDNN's GEMM packing of B [%lld, %lld] failed (status %d, %zu of %zu bytes)",
                             (long long)g.k, (long long)g.m, st, bytes, a->p->gpack);
    return NULL;
}

typedef struct mm_bias_arg {
    float *c;
    const float *bias;
    int64_t n, ldc;
    bool sum;
} mm_bias_arg;

static void mm_bias_rows(void *arg, int64_t r0, int64_t r1)
{
    const mm_bias_arg *a = arg;
    for (int64_t i = r0; i < r1; i++) {
        float *row = a->c + i * a->ldc;
        if (a->sum) _Pragma("omp simd") for (int64_t j = 0; j < a->n; j++) row[j] += a->bias[j];
        else memcpy(row, a->bias, sizeof(float) * (size_t)a->n);
    }
}

/* C = A B (+ bias, + what C holds when sum) through the packed GEMM; the activation pass is the caller's. */
static wf_status *mm_gp_run(wf__kctx *k, wf__dn_prim *p, const mm_desc *d, const float *a, const float *b,
                            uint64_t bver, float *c, const float *bias, bool sum)
{
    wf__dn_run *r = NULL;
    void *wbuf = NULL;
    bool cached = false;
    mm_gp_arg ga = {d, p, b};
    wf_status *s = wf__dn_run_get(k, p, &r);
    if (!s) s = wf__dn_weights_with(k, p, r, bver, p->gpack, mm_gp_pack_into, &ga, &wbuf, &cached);
    if (!s) {
        mm_gp_geom g;
        mm_gp_geometry(d, &g);
        float beta = sum || bias ? 1.0f : 0.0f;
        if (bias) {
            mm_bias_arg ba = {c, bias, g.m, g.ldc, sum};
            wf__parallel_for(k, g.n, 65536 / (g.m + 1) + 1, mm_bias_rows, &ba);
        }
        int tok = wf__intra_begin(k);
        int st = mm_gp_compute("P", g.tb, &g.m, &g.n, &g.k, wbuf, &g.lda, a, &g.ldb, &beta, c, &g.ldc);
        wf__intra_end(k, tok);
        if (st) s = wf__kctx_fail(k, WF_INTERNAL, "oneDNN's packed GEMM [%lld x %lld] x [%lld x %lld] failed (status %d)",
                                  (long long)g.n, (long long)g.k, (long long)g.k, (long long)g.m, st);
        else atomic_fetch_add(&g_gpack_runs, 1);
    }
    if (wbuf) wf__dn_weights_done(p, cached);
    if (r) wf__dn_run_put(p, r);
    return s;
}

/*
 * Which plain layout of a constant 2-D B [K, N] oneDNN 2.x's gemm:jit (the f32 matmul without AVX-512)
 * runs faster: row-major (ab, N contiguous) or column-major (ba, as ONNX Gemm's transB stores it). The two
 * differ by up to 2x, and the packed copy is made once, so the faster one is chosen. Measured on Zen 3 (2
 * threads, medians, GFLOP/s ab against ba): M 128, K 256, N 1024 (BERT's FFN up) 89 against 156; M 128,
 * 768x3072 91 against 173; M 32, 1024x1024 84 against 135; M 128, 512x512 128 against 184; but M 8, K 2048, N
 * 1000 (a batch-8 classifier) 111-149 against 50-73; M 8, 3072x768 101 against 53; M 8, 1024x1024 65 against
 * 53; M 512: within 10% either way except 512x512 (ba 149 against 110); products under 128 on a side: within
 * noise, so those keep the layout they are stored in. M 1 (a classifier's GEMV at batch 1) reads B once,
 * from memory rather than cache inside a model: there ab streams faster (1280 x 1280 from DRAM, 32 copies
 * in turn: 141 against 229 us with dnnl_sgemm; the classifiers' traced minima, ab against ba:
 * MobileNetV3-small 189 / 212 us, ShuffleNetV2 149 / 165, DenseNet-121 199 / 210, GoogLeNet 175 / 191,
 * EfficientNet-B0 202 / 203). So: ab for M 1 and where N < K; ba where N > K, or N == K from M 16.
 * WEFT_CPU_MATMUL_B=ab or ba forces one (tests).
 */
static bool mm_plain_ba(int64_t m, int64_t kd, int64_t n, bool stored_ba)
{
    const char *e = getenv("WEFT_CPU_MATMUL_B");
    if (e && !strcmp(e, "ab")) return false;
    if (e && !strcmp(e, "ba")) return true;
    if (kd < 128 || n < 128) return stored_ba;
    if (m < 2) return false;
    return n > kd || (n == kd && m >= 16);
}

/* B's two plain layouts for d (2-D); false when they cannot be described */
static bool mm_plain_mds(const mm_desc *d, dnnl_data_type_t dt, dnnl_memory_desc_t *ab, dnnl_memory_desc_t *ba)
{
    if (d->nd != 2) return false;
    dnnl_dims_t dims = {d->bd[0], d->bd[1]}, rs = {d->bd[1], 1}, cs = {1, d->bd[0]};
    return !dnnl_memory_desc_init_by_strides(ab, 2, dims, dt, rs) && !dnnl_memory_desc_init_by_strides(ba, 2, dims, dt, cs);
}

/* Whether the primitive's weights descriptor wprim is one of B's plain layouts */
static bool mm_is_plain(const mm_desc *d, dnnl_data_type_t dt, const dnnl_memory_desc_t *wprim)
{
    dnnl_memory_desc_t ab, ba;
    return mm_plain_mds(d, dt, &ab, &ba) && (dnnl_memory_desc_equal(wprim, &ab) || dnnl_memory_desc_equal(wprim, &ba));
}

/* The plain layout for B when the primitive (its weights md, wprim) takes B plain; false (nothing to
 * change) when it takes a blocked layout or the layout it has is the one to use. */
static bool mm_plain_choice(const mm_desc *d, dnnl_data_type_t dt, const dnnl_memory_desc_t *wprim,
                            dnnl_memory_desc_t *out)
{
    dnnl_memory_desc_t ab, ba;
    if (!mm_plain_mds(d, dt, &ab, &ba)) return false;
    bool is_ab = dnnl_memory_desc_equal(wprim, &ab), is_ba = dnnl_memory_desc_equal(wprim, &ba);
    if (!is_ab && !is_ba) return false;
    bool stored_ba = d->bs[0] == 1 && d->bd[1] > 1;
    bool want = mm_plain_ba(d->ad[0], d->bd[0], d->bd[1], stored_ba);
    if (want == is_ba) return false;
    *out = want ? ba : ab;
    return true;
}

static wf_status *mm_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
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
    if ((st = dnnl_memory_desc_init_by_strides(&p->md[WF__DN_SRC], d->nd, ad, ba->dt, as)) ||
        (st = dnnl_memory_desc_init_by_strides(&p->md[WF__DN_WEI], d->nd, bd, ba->dt, bs)) ||
        (st = dnnl_memory_desc_init_by_strides(&p->md[WF__DN_DST], d->nd, cd, ba->dt, cs)) ||
        (bias && (st = dnnl_memory_desc_init_by_strides(&p->md[WF__DN_BIAS], d->nd, biasd, ba->bias_dt, biass))))
        goto fail;
    /* A constant B in the layout the primitive wants (brgemm's blocked panels): a B stored as given would
     * be copied into panels inside every call, which for a batch-1 classifier (a GEMV over megabytes of
     * weights) took longer than the product itself */
    dnnl_memory_desc_t wany;
    if (ba->packed && (st = dnnl_memory_desc_init_by_tag(&wany, d->nd, bd, ba->dt, dnnl_format_tag_any))) goto fail;
    what = "matmul descriptor";
    if ((st = dnnl_matmul_desc_init(&md, &p->md[WF__DN_SRC], ba->packed ? &wany : &p->md[WF__DN_WEI],
                                    bias ? &p->md[WF__DN_BIAS] : NULL, &p->md[WF__DN_DST])))
        goto fail;
    what = "matmul post-op";
    if ((st = wf__dn_attr_sum(ba->act, ba->alpha, ba->sum, &attr))) goto fail;
    what = "matmul primitive descriptor";
    if ((st = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL))) goto fail;
    /* Where the primitive takes B plain (gemm:jit, oneDNN 2.x without AVX-512), the packed GEMM takes a
     * constant B instead, and no primitive is made */
    if (ba->gpack && mm_is_plain(d, ba->dt, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0)) &&
        (p->gpack = mm_gp_bytes(d)) > 0)
        goto fail; /* st is dnnl_success */
    /* Otherwise either plain layout is open to a constant B, and the GEMM's speed depends on it
     * (mm_plain_ba says how) */
    dnnl_memory_desc_t wplain;
    if (ba->packed && mm_plain_choice(d, ba->dt, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &wplain)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        if ((st = dnnl_matmul_desc_init(&md, &p->md[WF__DN_SRC], &wplain, bias ? &p->md[WF__DN_BIAS] : NULL,
                                        &p->md[WF__DN_DST])) ||
            (st = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL)))
            goto fail;
    }
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (ba->packed) {
        p->md[WF__DN_WEI_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        what = "matmul weights reorder";
        if (!dnnl_memory_desc_equal(&p->md[WF__DN_WEI], &p->md[WF__DN_WEI_PRIM]) &&
            (st = wf__dn_reorder_create(eng, &p->md[WF__DN_WEI], &p->md[WF__DN_WEI_PRIM], &p->wreorder, &p->wscratch)))
            goto fail;
    }
    what = "matmul primitive";
    st = dnnl_primitive_create(&p->prim, pd);
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st == dnnl_success ? NULL : wf__dn_fail(k, st, what);
}

/* C = A @ B (+ bias over N, + what C holds when sum, then act) through oneDNN; all pointers are of dnnl
 * type dt (bias: bias_dt). bver: B's content version (wf_tensor.version; 0: none). A stamped 2-D B
 * (weights) is packed once per version into the primitive's own layout (wf__dn_weights), as Conv2D's
 * weights are. */
static wf_status *mm_dnnl(wf__kctx *k, const mm_geom *g, dnnl_data_type_t dt, const void *a, const void *b,
                          uint64_t bver, void *c, const void *bias, dnnl_data_type_t bias_dt, bool sum, int act,
                          double alpha)
{
    mm_desc d;
    mm_describe(g, &d);
    mm_build_arg ba = {&d, dt, bias ? bias_dt : dnnl_data_type_undef, act, alpha, bver != 0 && d.nd == 2, sum};
    ba.gpack = mm_gpack_wanted(&d, dt, ba.packed, act, alpha);
    int64_t key[WF__DN_KEY_MAX];
    int nk = 0;
    key[nk++] = 'M';
    key[nk++] = dt;
    key[nk++] = ba.packed | sum << 1 | ba.gpack << 2;
    key[nk++] = ba.bias_dt;
    key[nk++] = act;
    memcpy(&key[nk++], &alpha, sizeof alpha);
    key[nk++] = d.nd;
    for (int i = 0; i < d.nd; i++) {
        key[nk++] = d.ad[i], key[nk++] = d.as[i], key[nk++] = d.bd[i], key[nk++] = d.bs[i];
        key[nk++] = d.cd[i];
    }
    wf__dn_prim *p;
    WF__TRY(wf__dn_acquire(k, key, nk, mm_build, &ba, &p));
    if (p->gpack) {
        wf_status *s = mm_gp_run(k, p, &d, a, b, bver, c, bias, sum);
        wf__dn_release(k, p);
        if (!s && act != WF__ACT_NONE) wf__dn_relu_pass(k, c, dt, d.cd[0] * d.cd[1], act, alpha, k->fused_beta);
        return s;
    }
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    const dnnl_memory_desc_t *mds[4] = {&p->md[WF__DN_SRC], &p->md[WF__DN_WEI], &p->md[WF__DN_DST],
                                        &p->md[WF__DN_BIAS]};
    void *ptrs[4] = {(void *)a, (void *)b, c, (void *)bias};
    wf__dn_run *r = NULL;
    void *wbuf = NULL;
    bool wcached = false;
    wf_status *s = wf__dn_run_get(k, p, &r);
    if (!s && p->wreorder && !(s = wf__dn_weights(k, p, r, b, bver, &wbuf, &wcached))) {
        mds[1] = &p->md[WF__DN_WEI_PRIM];
        ptrs[1] = wbuf;
    }
    if (!s) s = wf__dn_exec(k, r, WF__DN_SLOT_PRIM, p->prim, bias ? 4 : 3, ids, mds, ptrs, &p->scratch);
    if (wbuf) wf__dn_weights_done(p, wcached);
    wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    if (!s && !wf__dn_act_in_prim(act, alpha)) {
        int64_t n = 1;
        for (int i = 0; i < d.nd; i++) n *= d.cd[i];
        wf__dn_relu_pass(k, c, dt, n, act, alpha, k->fused_beta);
    }
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

/* The strides of a, b and the batch dims of g (row-major, ta/tb as the geometry says) */
static void mm_ref_setup(const mm_geom *g, const void *a, const void *b, void *c, mm_ref_arg *r)
{
    *r = (mm_ref_arg){.g = g, .a = a, .b = b, .c = c};
    int64_t amat = g->m * g->kdim, bmat = g->kdim * g->n, sa = amat, sb = bmat;
    for (int i = g->nb - 1; i >= 0; i--) {
        r->a_bs[i] = g->abat[i] == 1 ? 0 : sa;
        r->b_bs[i] = g->bbat[i] == 1 ? 0 : sb;
        sa *= g->abat[i];
        sb *= g->bbat[i];
    }
    r->sam = g->ta ? 1 : g->kdim;
    r->sak = g->ta ? g->m : 1;
    r->sbk = g->tb ? 1 : g->n;
    r->sbn = g->tb ? g->kdim : 1;
}

static void mm_ref(wf__kctx *k, const mm_geom *g, wf_dtype t, const void *a, const void *b, void *c)
{
    mm_ref_arg r;
    mm_ref_setup(g, a, b, c, &r);
    int64_t rows = g->batch * g->m, work = g->n * g->kdim;
    int64_t grain = work > 0 ? 32768 / work + 1 : 1024;
    wf__range_fn fn = t == WF_F64 ? mm_ref_f64 : t == WF_I32 ? mm_ref_i32 : mm_ref_i64;
    wf__parallel_for(k, rows, grain, fn, &r);
}

/*
 * f32 products of at most MM_SMALL_MACS multiply-adds (a classifier's last Gemm on a few rows, such as
 * bench_lstm's [8 x 128] x [128 x 10]) as a plain loop on the calling thread. oneDNN's call costs a fixed
 * 6-11 us there (traced minima in bench_lstm's model on Zen 3: the primitive 6-7, the packed GEMM 10.8)
 * against about 1 for the loop. Where A's rows and B's columns are both contiguous along K (A as stored,
 * B transposed: Gemm's transB) the outputs are dot products; otherwise each row of C is a sum of B's rows
 * scaled by A's values. A fused residual is in C already and is added to; the bias and the activation
 * follow (wf__dn_epilogue). WEFT_CPU_GEMM_SMALL=0 keeps oneDNN's paths (tests, A/B measurements).
 */
#define MM_SMALL_MACS 16384

static bool mm_small_takes(const mm_geom *g)
{
    static atomic_int off = -1;
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) {
        const char *e = getenv("WEFT_CPU_GEMM_SMALL");
        atomic_store_explicit(&off, o = e && !strcmp(e, "0"), memory_order_relaxed);
    }
    return !o && g->batch * g->m * g->n * g->kdim <= MM_SMALL_MACS;
}

static atomic_int_least64_t g_small_runs;

int64_t wf__mm_small_runs(void) { return atomic_load(&g_small_runs); }

WF__VEC static void mm_small(const mm_ref_arg *r, bool sum)
{
    const float *a = r->a, *b = r->b;
    float *c = r->c;
    int64_t m = r->g->m, n = r->g->n, kd = r->g->kdim, rows = r->g->batch * m;
    for (int64_t row = 0; row < rows; row++) {
        int64_t ao, bo;
        mm_offsets(r, row / m, &ao, &bo);
        const float *ap = a + ao + row % m * r->sam, *bp = b + bo;
        float *cr = c + row * n;
        if (r->sak == 1 && r->sbk == 1) {
            for (int64_t j = 0; j < n; j++) {
                const float *bj = bp + j * r->sbn;
                float acc = 0;
                _Pragma("omp simd reduction(+ : acc)") for (int64_t q = 0; q < kd; q++) acc += ap[q] * bj[q];
                cr[j] = (sum ? cr[j] : 0.0f) + acc;
            }
            continue;
        }
        if (!sum) memset(cr, 0, sizeof(float) * (size_t)n);
        for (int64_t q = 0; q < kd; q++) {
            float aq = ap[q * r->sak];
            const float *bq = bp + q * r->sbk;
            if (r->sbn == 1) _Pragma("omp simd") for (int64_t j = 0; j < n; j++) cr[j] += aq * bq[j];
            else for (int64_t j = 0; j < n; j++) cr[j] += aq * bq[j * r->sbn];
        }
    }
}

/* Matrix product of a and b into a new output 0 of a's dtype, honouring a fused bias/activation and, for
 * MatMul, a fused residual (k->fused_residual: f32, the output's shape; the product is added to it in the
 * primitive, over its own bytes where the memory plan gave them to the output). */
static wf_status *matmul_core(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, int ta, int tb,
                              const wf_tensor *bias, const wf_tensor *res, int act, double alpha, mm_geom *g,
                              wf_tensor **outp)
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
    if (res) {
        char sr[160], so[160];
        if (res->dtype != WF_F32 || t != WF_F32 || res->rank != g->out_rank ||
            memcmp(res->dims, g->out_dims, sizeof(int64_t) * (size_t)g->out_rank) ||
            (act != WF__ACT_NONE && wf__dn_act_in_prim(act, alpha)))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                                 "the fused residual %s%s cannot be added to the result %s%s in this kernel",
                                 wf_dtype_name(res->dtype), wf__shape_str(res->rank, res->dims, sr), wf_dtype_name(t),
                                 wf__shape_str(g->out_rank, g->out_dims, so));
        bool reused;
        WF__TRY(wf__kctx_output_reuse(k, 0, k->fused_residual, t, g->out_rank, g->out_dims, &o, &reused));
        if (!reused && o->bytes) memcpy(o->data, res->data, o->bytes);
    } else {
        WF__TRY(wf__kctx_output(k, 0, t, g->out_rank, g->out_dims, &o));
    }
    *outp = o;
    int64_t rows = g->batch * g->m;
    if (rows == 0 || g->n == 0) return NULL;
    const void *bp = bias ? bias->data : NULL;
    if (g->kdim == 0) {
        if (!res) memset(o->data, 0, o->bytes);
        wf__dn_epilogue(o->data, t, rows, g->n, 1, bp, act, alpha, k->fused_beta);
        return NULL;
    }
    if (t == WF_F64 || t == WF_I32 || t == WF_I64) {
        mm_ref(k, g, t, a->data, b->data, o->data);
        wf__dn_epilogue(o->data, t, rows, g->n, 1, bp, act, alpha, k->fused_beta);
        return NULL;
    }
    if (t == WF_F32 && mm_small_takes(g)) {
        mm_ref_arg r;
        mm_ref_setup(g, a->data, b->data, o->data, &r);
        mm_small(&r, res != NULL);
        wf__dn_epilogue(o->data, t, rows, g->n, 1, bp, act, alpha, k->fused_beta);
        atomic_fetch_add(&g_small_runs, 1);
        return NULL;
    }
    if (t == WF_F32)
        return mm_dnnl(k, g, dnnl_f32, a->data, b->data, b->version, o->data, bp, dnnl_f32, res != NULL, act, alpha);
    if (t == WF_BF16) {
        wf_status *s = mm_dnnl(k, g, dnnl_bf16, a->data, b->data, b->version, o->data, bp, dnnl_bf16, false, act, alpha);
        /* a CPU without bf16 support in oneDNN falls through to the f32 route below */
        if (!s || wf_status_code(s) != WF_UNIMPLEMENTED) return s;
        wf_status_free(s);
    }
    /* f16 (and bf16 without native support): convert through f32 and round once at the end */
    float *fa = NULL, *fb = NULL, *fbias = NULL, *fc = NULL;
    wf_status *s;
    if (!(s = wf__dn_to_f32(k, a->data, t, a->size, &fa)) && !(s = wf__dn_to_f32(k, b->data, t, b->size, &fb)) &&
        !(s = wf__dn_to_f32(k, bp, t, g->n, &fbias)) && !(s = wf__dn_alloc_f32(k, o->size, &fc)) &&
        !(s = mm_dnnl(k, g, dnnl_f32, fa, fb, 0, fc, fbias, dnnl_f32, false, act, alpha)))
        wf__convert(fc, WF_F32, o->data, t, o->size);
    wf__dn_tmp_free(fa);
    wf__dn_tmp_free(fb);
    wf__dn_tmp_free(fbias);
    wf__dn_tmp_free(fc);
    return s;
}

wf_status *wf__dn_k_matmul(wf__kctx *k)
{
    mm_geom g;
    wf_tensor *o;
    const wf_tensor *res = k->fused_residual > 0 && k->fused_residual < k->n_in ? k->in[k->fused_residual] : NULL;
    return matmul_core(k, k->in[0], k->in[1], (int)wf__attr_i(k->op, k->attrs, "transpose_a"),
                       (int)wf__attr_i(k->op, k->attrs, "transpose_b"), wf__dn_fused_bias(k), res, k->fused_act,
                       k->fused_alpha, &g, &o);
}

/* ---- Gemm: the product through the MatMul path, then alpha, beta*C, bias and act in one pass ------- */

wf_status *wf__dn_k_gemm(wf__kctx *k)
{
    /* a fused bias may sit at index 2 when C is absent */
    const wf_tensor *a = k->in[0], *b = k->in[1], *c = k->n_in > 2 && k->fused_bias != 2 ? k->in[2] : NULL;
    char sa[160], sb[160];
    if (a->rank != 2 || b->rank != 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s must both be 2-D", wf__shape_str(a->rank, a->dims, sa),
                             wf__shape_str(b->rank, b->dims, sb));
    double alpha = wf__attr_f(k->op, k->attrs, "alpha"), beta = wf__attr_f(k->op, k->attrs, "beta");
    const wf_tensor *bias = wf__dn_fused_bias(k);
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
                         (int)wf__attr_i(k->op, k->attrs, "transB"), NULL, NULL, WF__ACT_NONE, 0, &g, &o)))
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
                y[i * n + j] = wf__dn_act_f(k->fused_act, (float)k->fused_alpha, (float)k->fused_beta, v);
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
                wf__store_f64(o->data, ot, idx, wf__dn_act_d(k->fused_act, k->fused_alpha, k->fused_beta, v));
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

