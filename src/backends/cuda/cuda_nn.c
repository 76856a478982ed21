/*
 * Host side of the CUDA NN ops: MatMul (numpy batch broadcasting, optional transposes) and Gemm through
 * cuBLAS (f32 and f64 natively, f16 and bf16 with f32 accumulation, as the CPU computes them; i32 and
 * i64 MatMul through a tiled kernel that wraps as the CPU does), and BiasAdd. Convolutions and pools are left to the CPU for now (no kernel here: placement falls back).
 */
#include <limits.h>
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "ops/kutil_matmul.h"

typedef wf__ku_mm mm_geom;

static wf_status *mm_plan(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, int ta, int tb, mm_geom *g)
{
    memset(g, 0, sizeof *g);
    char sa[160], sb[160];
    if (a->rank == 0 || b->rank == 0)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "operands must have rank >= 1, got A %s and B %s", cu_tstr(a, sa),
                                  cu_tstr(b, sb));
    if (a->dtype != b->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s have different dtypes", cu_tstr(a, sa),
                                  cu_tstr(b, sb));
    switch (wf__ku_mm_plan(a->rank, a->dims, b->rank, b->dims, ta, tb, g)) {
    case WF__KU_MM_INNER:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s have incompatible inner dims %lld and %lld",
                                  cu_tstr(a, sa), cu_tstr(b, sb), (long long)g->ka, (long long)g->kb);
    case WF__KU_MM_BATCH:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s have batch dims that do not broadcast",
                                  cu_tstr(a, sa), cu_tstr(b, sb));
    default: break;
    }
    bool is_int = a->dtype == WF_I32 || a->dtype == WF_I64; /* own kernel, no 32-bit limit */
    if (!is_int && (g->m > INT_MAX || g->n > INT_MAX || g->kdim > INT_MAX || g->batch > INT_MAX))
        return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "A %s and B %s exceed cuBLAS's 32-bit dims", cu_tstr(a, sa),
                                  cu_tstr(b, sb));
    return NULL;
}

/* `count` row-major products C = alpha op(A) op(B) + beta C, element offsets and batch strides given.
 * cuBLAS is column-major: the row-major C is the column-major C^T = op(B)^T op(A)^T, so B goes first. */
static wf_status *gemm(wf__kctx *k, wf_dtype t, const mm_geom *g, int64_t m, int64_t count, const char *a, int64_t abs,
                       const char *b, int64_t bbs, char *c, double alpha, double beta)
{
    cu_dev *d = cu_of(k);
    cudaDataType dt = t == WF_F64 ? CUDA_R_64F : t == WF_F16 ? CUDA_R_16F : t == WF_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t ct = t == WF_F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    float fa = (float)alpha, fb = (float)beta;
    const void *pa = t == WF_F64 ? (const void *)&alpha : &fa, *pb = t == WF_F64 ? (const void *)&beta : &fb;
    int n = (int)g->n, kd = (int)g->kdim, mm = (int)m;
    int lda = g->ta ? mm : kd, ldb = g->tb ? kd : n;
    pthread_mutex_lock(&d->blas_mu);
    cublasStatus_t st = cu_blas.gemm_strided_batched_ex(d->blas, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, g->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                   n, mm, kd, pa, b, dt, ldb, bbs, a, dt, lda, abs, pb, c, dt, n,
                                                   (long long)m * n, (int)count, ct, CUBLAS_GEMM_DEFAULT);
    pthread_mutex_unlock(&d->blas_mu);
    if (st == CUBLAS_STATUS_SUCCESS) return NULL;
    return cu_host->kctx_fail(k, st == CUBLAS_STATUS_ALLOC_FAILED ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                              "cuBLAS GemmStridedBatchedEx (%s, m=%d n=%d k=%d batch=%lld) failed on %s: %s",
                              cu_dtype_name(t), mm, n, kd, (long long)count, k->device->short_name,
                              cu_blas.status_string(st));
}

/* The product of a and b into y (which Gemm has pre-filled with C when beta != 0). */
static wf_status *matmul_run(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, const mm_geom *g, const wf_tensor *y,
                             double alpha, double beta)
{
    wf_dtype t = a->dtype;
    size_t es = cu_size(t);
    const char *ap = cu_ptr(a), *bp = cu_ptr(b);
    char *yp = cu_ptr(y);
    int64_t amat = g->m * g->kdim, bmat = g->kdim * g->n, cmat = g->m * g->n;
    int64_t abs = wf__ku_mm_batch_stride(g, g->abat, amat), bbs = wf__ku_mm_batch_stride(g, g->bbat, bmat);
    if (g->nb > 0 && bbs == 0 && !g->ta) /* B shared and A not transposed: A's batch folds into M */
        return gemm(k, t, g, g->batch * g->m, 1, ap, 0, bp, 0, yp, alpha, beta);
    if (abs >= 0 && bbs >= 0) return gemm(k, t, g, g->m, g->batch, ap, abs, bp, bbs, yp, alpha, beta);
    for (int64_t bi = 0; bi < g->batch; bi++) {
        int64_t ao, bo;
        wf__ku_mm_batch_offsets(g, bi, &ao, &bo);
        wf_status *s = gemm(k, t, g, g->m, 1, ap + ao * es, 0, bp + bo * es, 0, yp + bi * cmat * es, alpha, beta);
        if (s) return s;
    }
    return NULL;
}

/* Integer MatMul (cuBLAS has no i64 GEMM): the tiled kernel, with each operand's batch strides formed
 * as the CPU's reference loop forms them, 0 along the dims it broadcasts. */
static wf_status *imatmul(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, const mm_geom *g, const wf_tensor *y)
{
    cuk_igemm p;
    memset(&p, 0, sizeof p);
    p.m = g->m;
    p.n = g->n;
    p.k = g->kdim;
    p.batch = g->batch;
    p.nb = g->nb;
    int64_t sa = g->m * g->kdim, sb = g->kdim * g->n;
    for (int i = g->nb - 1; i >= 0; i--) {
        p.bat[i] = g->bat[i];
        p.a_bs[i] = g->abat[i] == 1 ? 0 : sa;
        p.b_bs[i] = g->bbat[i] == 1 ? 0 : sb;
        sa *= g->abat[i];
        sb *= g->bbat[i];
    }
    p.sam = g->ta ? 1 : g->kdim;
    p.sak = g->ta ? g->m : 1;
    p.sbk = g->tb ? 1 : g->n;
    p.sbn = g->tb ? g->kdim : 1;
    return cu_check(k, cuk_imatmul(cu_of(k)->compute, a->dtype, cu_ptr(a), cu_ptr(b), cu_ptr(y), &p),
                    "integer MatMul kernel");
}

static wf_status *zero(wf__kctx *k, const wf_tensor *y)
{
    return cu_check(k, (int)cudaMemsetAsync(cu_ptr(y), 0, (size_t)y->size * cu_size(y->dtype), cu_of(k)->compute),
                    "memset");
}

static wf_status *k_matmul(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    mm_geom g;
    wf_status *s = cu_enter(k);
    if (s || (s = mm_plan(k, a, b, (int)cu_host->attr_get(k->op, k->attrs, "transpose_a")->i,
                          (int)cu_host->attr_get(k->op, k->attrs, "transpose_b")->i, &g)))
        return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, a->dtype, g.out_rank, g.out_dims, &y)) || !y->size) return s;
    if (g.kdim == 0) return zero(k, y);
    if (a->dtype == WF_I32 || a->dtype == WF_I64) return imatmul(k, a, b, &g, y);
    return matmul_run(k, a, b, &g, y, 1, 0);
}

static wf_status *k_gemm(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1], *c = k->n_in > 2 ? k->in[2] : NULL;
    char sa[160], sb[160];
    if (a->rank != 2 || b->rank != 2)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s must both be 2-D", cu_tstr(a, sa), cu_tstr(b, sb));
    if (c && c->dtype != a->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "C %s has a different dtype than A %s", cu_tstr(c, sb),
                                  cu_tstr(a, sa));
    mm_geom g;
    wf_status *s = cu_enter(k);
    if (s || (s = mm_plan(k, a, b, (int)cu_host->attr_get(k->op, k->attrs, "transA")->i,
                          (int)cu_host->attr_get(k->op, k->attrs, "transB")->i, &g)))
        return s;
    int64_t m = g.m, n = g.n;
    if (c && !(c->rank <= 2 && (c->rank < 1 || c->dims[c->rank - 1] == n || c->dims[c->rank - 1] == 1) &&
               (c->rank < 2 || c->dims[0] == m || c->dims[0] == 1)))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "C %s does not broadcast to the output [%lld,%lld]", cu_tstr(c, sa),
                                  (long long)m, (long long)n);
    double alpha = cu_host->attr_get(k->op, k->attrs, "alpha")->f, beta = cu_host->attr_get(k->op, k->attrs, "beta")->f;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, a->dtype, 2, g.out_dims, &y)) || !y->size) return s;
    if (a->dtype == WF_I32 || a->dtype == WF_I64) {
        if ((s = g.kdim ? imatmul(k, a, b, &g, y) : zero(k, y))) return s;
        int64_t cs0 = c && c->rank == 2 && c->dims[0] != 1 ? c->dims[1] : 0;
        int64_t cs1 = c && c->rank >= 1 && c->dims[c->rank - 1] != 1 ? 1 : 0;
        return cu_check(k, cuk_igemm_epilogue(cu_of(k)->compute, a->dtype, cu_ptr(y), c ? cu_ptr(c) : NULL, m, n, cs0, cs1,
                                              alpha, beta),
                        "integer Gemm epilogue kernel");
    }
    if (c) {
        int64_t cs0 = c->rank == 2 && c->dims[0] != 1 ? c->dims[1] : 0;
        int64_t cs1 = c->rank >= 1 && c->dims[c->rank - 1] != 1 ? 1 : 0;
        /* with an empty inner dim the product is zero and y is beta * C alone */
        s = cu_check(k, cuk_gemm_fill(cu_of(k)->compute, a->dtype, cu_ptr(y), cu_ptr(c), m, n, cs0, cs1,
                                      g.kdim ? 1.0 : beta),
                     "Gemm C kernel");
        if (s || !g.kdim) return s;
    } else if (!g.kdim) {
        return zero(k, y);
    }
    return matmul_run(k, a, b, &g, y, alpha, c ? beta : 0);
}

static wf_status *k_bias_add(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *b = k->in[1];
    bool nchw = !strcmp(cu_host->attr_get(k->op, k->attrs, "data_format")->s, "NCHW");
    int ax = nchw ? 1 : x->rank - 1;
    char sx[160], sb[160];
    if (x->rank < (nchw ? 2 : 1) || b->rank != 1 || x->dims[ax] != b->dims[0] || b->dtype != x->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "bias %s does not match channel dim %d of x %s", cu_tstr(b, sb), ax,
                                  cu_tstr(x, sx));
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    int64_t inner = 1;
    for (int i = ax + 1; i < x->rank; i++) inner *= x->dims[i];
    return cu_check(k, cuk_bias_add(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(b), cu_ptr(y), y->size, b->dims[0],
                                    inner),
                    "BiasAdd kernel");
}

const wf__kernel_def cu_kernels_nn[] = {
    {"MatMul", "GPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64), 0, k_matmul, NULL, 0},
    {"Gemm", "GPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64), 0, k_gemm, NULL, 0},
    /* in place: thread i reads x[i] before it writes y[i] */
    {"BiasAdd", "GPU", WF__DT_NUMERIC, 0, k_bias_add, NULL, WF__K_INPLACE},
    {0},
};
