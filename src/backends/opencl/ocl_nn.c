/*
 * OpenCL kernels of the nn family: MatMul and Gemm (f32/f64 through CLBlast, the other dtypes through a
 * plain kernel with the same numpy/ONNX semantics as the CPU: ints wrap, f16/bf16 accumulate in f32 and
 * round once), BiasAdd, the shared helpers of ocl_nnr.h, and the family's table (conv and pools are in
 * ocl_nn_conv.c).
 */
#include <stdio.h>

#include <clblast_c.h>

#include "backends/opencl/ocl_nnr.h"
#include "ops/kutil_matmul.h"

/* ---- shared helpers (ocl_nnr.h) -------------------------------------------------------------------- */

const char *ocl_nnr_dtname(wf_dtype t)
{
    static const char *const names[] = {"invalid", "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "bool"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "invalid";
}

const char *ocl_nnr_tstr(const wf_tensor *t, char *buf)
{
    size_t n = (size_t)snprintf(buf, 160, "%s[", ocl_nnr_dtname(t->dtype));
    for (int i = 0; i < t->rank && n < 140; i++)
        n += (size_t)snprintf(buf + n, 160 - n, i ? ",%lld" : "%lld", (long long)t->dims[i]);
    snprintf(buf + n, 160 - n, "]");
    return buf;
}

bool ocl_nnr_is_float(wf_dtype t) { return t == WF_F32 || t == WF_F64 || t == WF_F16 || t == WF_BF16; }

const char *ocl_nnr_opts(const wf__kctx *k, wf_dtype t, char *buf)
{
    static const char *const dt[] = {"", "F32", "F64", "F16", "BF16", "I8", "U8", "I16", "I32", "I64", "U8"};
    snprintf(buf, 64, "-DDT_%s%s", (unsigned)t < 11 ? dt[t] : "F32", ocl_of(k)->fp64 ? " -DHAS_F64" : "");
    return buf;
}

wf_status *ocl_nnr_kernel(wf__kctx *k, const char *prog, const char *src, wf_dtype t, const char *name, cl_kernel *out)
{
    char opts[64];
    return ocl_kernel(k, prog, src, ocl_nnr_opts(k, t, opts), name, out);
}

wf_status *ocl_nnr_read(wf__kctx *k, const wf_tensor *t, void *dst, size_t bytes)
{
    if (!bytes) return NULL;
    if (t->data) {
        memcpy(dst, t->data, bytes);
        return NULL;
    }
    if (ocl_of(k)->no_readback)
        return ocl_host->kctx_fail(k, WF_FAILED_PRECONDITION, "reads %zu bytes of an input back from %s "
                                   "(WEFT_OCL_NO_READBACK is set)", bytes, k->device->short_name);
    cl_int st = clEnqueueReadBuffer(ocl_of(k)->q, ocl_mem(t), CL_TRUE, t->dev_offset, bytes, dst, 0, NULL, NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "read-back of a small input");
}

int64_t ocl_nnr_int_at(const void *p, wf_dtype t, int64_t i)
{
    return t == WF_I32 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

ocl_nnr_dbl ocl_nnr_dbl_of(const wf__kctx *k, double v)
{
    ocl_nnr_dbl r;
    memset(&r, 0, sizeof r);
    if (ocl_of(k)->fp64) {
        r.v.d = v;
        r.size = sizeof(cl_double);
    } else {
        r.v.f = (cl_float)v;
        r.size = sizeof(cl_float);
    }
    return r;
}

/* ---- kernels ----------------------------------------------------------------------------------------- */

static const char *g_src = OCL_NNR_PRELUDE
    /* One output element per work-item over (N, M, batch). mode 0: MatMul; 1: Gemm's alpha*AB + beta*C
     * with C broadcast through strides cs0/cs1 (0 where C has size 1), has_c says whether there is a C.
     * Integers accumulate in ulong so overflow wraps like numpy's fixed-width arithmetic; Gemm's integer
     * epilogue goes through floating point like the CPU (the product narrowed to T first). */
    "__kernel void mm(__global const T *a, ulong ao, __global const T *b, ulong bo, __global T *c, ulong co,\n"
    "                 ulong M, ulong N, ulong K, ulong sam, ulong sak, ulong sbk, ulong sbn,\n"
    "                 ulong astr, ulong bstr, ulong cstr, int mode, DBL alpha, DBL beta,\n"
    "                 __global const T *cin, ulong cio, ulong cs0, ulong cs1, int has_c) {\n"
    "  size_t j = get_global_id(0), i = get_global_id(1), bi = get_global_id(2);\n"
    "  a += ao + bi * astr; b += bo + bi * bstr; c += co + bi * cstr; cin += cio;\n"
    "  const __global T *ap = a + i * sam, *bp = b + j * sbn;\n"
    "#ifdef IS_INT\n"
    "  ulong acc = 0;\n"
    "  for (ulong q = 0; q < K; q++) acc += (ulong)LD(ap, q * sak) * (ulong)LD(bp, q * sbk);\n"
    "  if (mode == 0) { ST(c, i * N + j, (long)acc); return; }\n"
    "  long v = (long)((DBL)(long)(T)acc * alpha);\n"
    "  if (has_c) v += (long)(beta * (DBL)LD(cin, i * cs0 + j * cs1));\n"
    "  ST(c, i * N + j, v);\n"
    "#else\n"
    "  CT acc = 0;\n"
    "  for (ulong q = 0; q < K; q++) acc += LD(ap, q * sak) * LD(bp, q * sbk);\n"
    "  if (mode == 0) { ST(c, i * N + j, acc); return; }\n"
    "  CT v = (CT)alpha * acc;\n"
    "  if (has_c) v += (CT)beta * LD(cin, i * cs0 + j * cs1);\n"
    "  ST(c, i * N + j, v);\n"
    "#endif\n"
    "}\n"
    /* Gemm through CLBlast: Y starts as the broadcast C (or zeros), then Y = alpha*AB + beta*Y */
    "__kernel void gemm_fill(__global T *y, ulong yo, __global const T *cin, ulong cio, ulong N, ulong cs0,\n"
    "                        ulong cs1, int has_c) {\n"
    "  size_t g = get_global_id(0), i = g / N, j = g % N;\n"
    "  y += yo; cin += cio;\n"
    "  ST(y, g, has_c ? LD(cin, i * cs0 + j * cs1) : (CT)0);\n"
    "}\n"
    /* y = x + b over channel (i / inner) % C; integers wrap (computed in long, stored narrowed) */
    "__kernel void bias_add(__global const T *x, ulong xo, __global const T *b, ulong bo, __global T *y, ulong yo,\n"
    "                       ulong C, ulong inner) {\n"
    "  size_t i = get_global_id(0);\n"
    "  x += xo; b += bo; y += yo;\n"
    "#ifdef IS_INT\n"
    "  ST(y, i, (long)((ulong)LD(x, i) + (ulong)LD(b, (i / inner) % C)));\n"
    "#else\n"
    "  ST(y, i, LD(x, i) + LD(b, (i / inner) % C));\n"
    "#endif\n"
    "}\n";

/* ---- MatMul geometry (numpy semantics, as the CPU's k_dnnl_matmul.c) --------------------------------- */

typedef wf__ku_mm mm_geom;

static wf_status *mm_plan(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, int ta, int tb, mm_geom *g)
{
    memset(g, 0, sizeof *g);
    char sa[160], sb[160];
    if (a->rank == 0 || b->rank == 0)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "operands must have rank >= 1, got A %s and B %s",
                                   ocl_nnr_tstr(a, sa), ocl_nnr_tstr(b, sb));
    if (a->dtype != b->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s have different dtypes", ocl_nnr_tstr(a, sa),
                                   ocl_nnr_tstr(b, sb));
    switch (wf__ku_mm_plan(a->rank, a->dims, b->rank, b->dims, ta, tb, g)) {
    case WF__KU_MM_INNER:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s have incompatible inner dims %lld and %lld",
                                   ocl_nnr_tstr(a, sa), ocl_nnr_tstr(b, sb), (long long)g->ka, (long long)g->kb);
    case WF__KU_MM_BATCH:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s have batch dims that do not broadcast",
                                   ocl_nnr_tstr(a, sa), ocl_nnr_tstr(b, sb));
    default: break;
    }
    return NULL;
}

/* One product call: `count` batch entries at the given element offsets and batch strides. */
typedef struct mm_call {
    int64_t m, n, kdim, count;
    int64_t ao, bo, co, abs, bbs, cbs;
} mm_call;

static wf_status *clblast_fail(wf__kctx *k, int st, const char *what)
{
    return ocl_host->kctx_fail(k, st == CLBlastTempBufferAllocFailure ? WF_OUT_OF_MEMORY : WF_INTERNAL,
                               "CLBlast %s failed on %s with status %d", what, k->device->short_name, st);
}

/* C = alpha*op(A)op(B) + beta*C through CLBlast (f32/f64 only; m, n, k > 0). */
static wf_status *mm_clblast(wf__kctx *k, wf_dtype t, int ta, int tb, const mm_call *c, double alpha, double beta,
                             cl_mem a, cl_mem b, cl_mem y)
{
    cl_command_queue *q = &ocl_of(k)->q;
    CLBlastTranspose tA = ta ? CLBlastTransposeYes : CLBlastTransposeNo, tB = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    size_t m = (size_t)c->m, n = (size_t)c->n, kd = (size_t)c->kdim;
    size_t lda = ta ? m : kd, ldb = tb ? kd : n, ldc = n;
    CLBlastStatusCode st;
    /* CLBlast's kernel database is not thread-safe on first use: one call per device at a time */
    pthread_mutex_lock(&ocl_of(k)->mu);
    if (c->count == 1) {
        st = t == WF_F32 ? CLBlastSgemm(CLBlastLayoutRowMajor, tA, tB, m, n, kd, (float)alpha, a, (size_t)c->ao, lda, b,
                                        (size_t)c->bo, ldb, (float)beta, y, (size_t)c->co, ldc, q, NULL)
                         : CLBlastDgemm(CLBlastLayoutRowMajor, tA, tB, m, n, kd, alpha, a, (size_t)c->ao, lda, b,
                                        (size_t)c->bo, ldb, beta, y, (size_t)c->co, ldc, q, NULL);
        pthread_mutex_unlock(&ocl_of(k)->mu);
        return st == CLBlastSuccess ? NULL : clblast_fail(k, st, t == WF_F32 ? "Sgemm" : "Dgemm");
    }
    st = t == WF_F32
             ? CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, tA, tB, m, n, kd, (float)alpha, a, (size_t)c->ao, lda,
                                          (size_t)c->abs, b, (size_t)c->bo, ldb, (size_t)c->bbs, (float)beta, y,
                                          (size_t)c->co, ldc, (size_t)c->cbs, (size_t)c->count, q, NULL)
             : CLBlastDgemmStridedBatched(CLBlastLayoutRowMajor, tA, tB, m, n, kd, alpha, a, (size_t)c->ao, lda,
                                          (size_t)c->abs, b, (size_t)c->bo, ldb, (size_t)c->bbs, beta, y,
                                          (size_t)c->co, ldc, (size_t)c->cbs, (size_t)c->count, q, NULL);
    pthread_mutex_unlock(&ocl_of(k)->mu);
    return st == CLBlastSuccess ? NULL : clblast_fail(k, st, t == WF_F32 ? "SgemmStridedBatched" : "DgemmStridedBatched");
}

/* The same through the plain kernel; gemm (may be NULL) carries Gemm's epilogue. */
typedef struct mm_epi {
    double alpha, beta;
    const wf_tensor *c;
    int64_t cs0, cs1;
} mm_epi;

static wf_status *mm_naive(wf__kctx *k, wf_dtype t, int ta, int tb, const mm_call *c, const mm_epi *e, cl_mem a,
                           cl_mem b, cl_mem y)
{
    cl_kernel kern;
    wf_status *s = ocl_nnr_kernel(k, "nn_mm", g_src, t, "mm", &kern);
    if (s) return s;
    cl_ulong ao = (cl_ulong)c->ao, bo = (cl_ulong)c->bo, co = (cl_ulong)c->co, M = (cl_ulong)c->m, N = (cl_ulong)c->n,
             K = (cl_ulong)c->kdim;
    cl_ulong sam = ta ? 1 : K, sak = ta ? M : 1, sbk = tb ? 1 : N, sbn = tb ? K : 1;
    cl_ulong abs = (cl_ulong)c->abs, bbs = (cl_ulong)c->bbs, cbs = (cl_ulong)c->cbs;
    cl_int mode = e != NULL, has_c = e && e->c;
    ocl_nnr_dbl alpha = ocl_nnr_dbl_of(k, e ? e->alpha : 1), beta = ocl_nnr_dbl_of(k, e ? e->beta : 0);
    cl_mem cm = has_c ? ocl_mem(e->c) : a;
    cl_ulong cio = has_c ? ocl_off(e->c) : 0, cs0 = e ? (cl_ulong)e->cs0 : 0, cs1 = e ? (cl_ulong)e->cs1 : 0;
    ocl_arg args[] = {OCL_ARG(a),   OCL_ARG(ao),   OCL_ARG(b),    OCL_ARG(bo),   OCL_ARG(y),   OCL_ARG(co),
                      OCL_ARG(M),   OCL_ARG(N),    OCL_ARG(K),    OCL_ARG(sam),  OCL_ARG(sak), OCL_ARG(sbk),
                      OCL_ARG(sbn), OCL_ARG(abs),  OCL_ARG(bbs),  OCL_ARG(cbs),  OCL_ARG(mode), OCL_DBL(alpha),
                      OCL_DBL(beta), OCL_ARG(cm),  OCL_ARG(cio),  OCL_ARG(cs0),  OCL_ARG(cs1), OCL_ARG(has_c)};
    size_t gsz[3] = {(size_t)c->n, (size_t)c->m, (size_t)c->count};
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 3, gsz, NULL);
}

/* Sets every element of the device tensor y to zero. */
static wf_status *fill_zero(wf__kctx *k, const wf_tensor *y)
{
    if (!y->size) return NULL;
    cl_ulong zero = 0;
    size_t es = ocl_size(y->dtype);
    cl_int st = clEnqueueFillBuffer(ocl_of(k)->q, ocl_mem(y), &zero, es, y->dev_offset, (size_t)y->size * es, 0, NULL,
                                    NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "buffer fill");
}

/* The product of a and b into a new output 0. For Gemm (e != NULL) the output is 2-D and C has already
 * been written into it when the CLBlast route is taken (see k_gemm). */
static wf_status *matmul_run(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, const mm_geom *g, const wf_tensor *y,
                             const mm_epi *e)
{
    wf_dtype t = a->dtype;
    int64_t rows = g->batch * g->m;
    if (rows == 0 || g->n == 0) return NULL;
    bool blas = (t == WF_F32 || t == WF_F64) && g->kdim > 0;
    if (!blas && g->kdim == 0 && !e) return fill_zero(k, y);
    cl_mem am = ocl_mem(a), bm = ocl_mem(b), ym = ocl_mem(y);
    mm_call c = {g->m, g->n, g->kdim, 1, (int64_t)ocl_off(a), (int64_t)ocl_off(b), (int64_t)ocl_off(y), 0, 0, 0};
    int64_t amat = g->m * g->kdim, bmat = g->kdim * g->n, cmat = g->m * g->n;
    int64_t abs = wf__ku_mm_batch_stride(g, g->abat, amat), bbs = wf__ku_mm_batch_stride(g, g->bbat, bmat);
    double alpha = e ? e->alpha : 1, beta = e && e->c ? e->beta : 0;
    if (g->nb > 0 && bbs == 0 && !g->ta) {
        /* B shared by every batch entry and A not transposed: A's batch folds into M, one large product */
        c.m = rows;
    } else if (abs >= 0 && bbs >= 0) {
        c.count = g->batch;
        c.abs = abs, c.bbs = bbs, c.cbs = cmat;
    } else {
        for (int64_t bi = 0; bi < g->batch; bi++) {
            mm_call ci = c;
            int64_t ao, bo;
            wf__ku_mm_batch_offsets(g, bi, &ao, &bo);
            ci.ao += ao, ci.bo += bo, ci.co += bi * cmat;
            wf_status *s = blas ? mm_clblast(k, t, g->ta, g->tb, &ci, alpha, beta, am, bm, ym)
                                : mm_naive(k, t, g->ta, g->tb, &ci, e, am, bm, ym);
            if (s) return s;
        }
        return NULL;
    }
    if (blas && c.count > 1 && (abs == 0 || bbs == 0)) {
        /* a shared operand as batch stride 0: not every BLAS accepts it, so one call per entry */
        for (int64_t bi = 0; bi < c.count; bi++) {
            mm_call ci = c;
            ci.count = 1;
            ci.ao += bi * abs, ci.bo += bi * bbs, ci.co += bi * cmat;
            wf_status *s = mm_clblast(k, t, g->ta, g->tb, &ci, alpha, beta, am, bm, ym);
            if (s) return s;
        }
        return NULL;
    }
    return blas ? mm_clblast(k, t, g->ta, g->tb, &c, alpha, beta, am, bm, ym) : mm_naive(k, t, g->ta, g->tb, &c, e, am, bm, ym);
}

static wf_status *k_matmul(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    mm_geom g;
    wf_status *s = mm_plan(k, a, b, (int)ocl_host->attr_get(k->op, k->attrs, "transpose_a")->i,
                           (int)ocl_host->attr_get(k->op, k->attrs, "transpose_b")->i, &g);
    if (s) return s;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, a->dtype, g.out_rank, g.out_dims, &y))) return s;
    /* CLBlast computes alpha*AB + beta*C; with beta 0 it may still read C, where a stale NaN would
     * survive 0*NaN: start from zeros */
    if ((a->dtype == WF_F32 || a->dtype == WF_F64) && g.kdim > 0 && (s = fill_zero(k, y))) return s;
    return matmul_run(k, a, b, &g, y, NULL);
}

/* ---- Gemm ------------------------------------------------------------------------------------------- */

static wf_status *k_gemm(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1], *c = k->n_in > 2 ? k->in[2] : NULL;
    char sa[160], sb[160];
    if (a->rank != 2 || b->rank != 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "A %s and B %s must both be 2-D", ocl_nnr_tstr(a, sa),
                                   ocl_nnr_tstr(b, sb));
    if (c && c->dtype != a->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "C %s has a different dtype than A %s", ocl_nnr_tstr(c, sb),
                                   ocl_nnr_tstr(a, sa));
    mm_geom g;
    wf_status *s = mm_plan(k, a, b, (int)ocl_host->attr_get(k->op, k->attrs, "transA")->i,
                           (int)ocl_host->attr_get(k->op, k->attrs, "transB")->i, &g);
    if (s) return s;
    int64_t m = g.m, n = g.n;
    if (c && !(c->rank <= 2 && (c->rank < 1 || c->dims[c->rank - 1] == n || c->dims[c->rank - 1] == 1) &&
               (c->rank < 2 || c->dims[0] == m || c->dims[0] == 1)))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "C %s does not broadcast to the output [%lld,%lld]",
                                   ocl_nnr_tstr(c, sa), (long long)m, (long long)n);
    mm_epi e = {ocl_host->attr_get(k->op, k->attrs, "alpha")->f, ocl_host->attr_get(k->op, k->attrs, "beta")->f, c, 0, 0};
    e.cs0 = c && c->rank == 2 && c->dims[0] != 1 ? c->dims[1] : 0;
    e.cs1 = c && c->rank >= 1 && c->dims[c->rank - 1] != 1 ? 1 : 0;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, a->dtype, 2, g.out_dims, &y))) return s;
    if (!y->size) return NULL;
    wf_dtype t = a->dtype;
    if ((t == WF_F32 || t == WF_F64) && g.kdim > 0) {
        cl_kernel kern;
        if ((s = ocl_nnr_kernel(k, "nn_mm", g_src, t, "gemm_fill", &kern))) return s;
        cl_mem ym = ocl_mem(y), cm = c ? ocl_mem(c) : ym;
        cl_ulong yo = ocl_off(y), co = c ? ocl_off(c) : 0, N = (cl_ulong)n, cs0 = (cl_ulong)e.cs0, cs1 = (cl_ulong)e.cs1;
        cl_int has_c = c != NULL;
        ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(cm), OCL_ARG(co), OCL_ARG(N), OCL_ARG(cs0), OCL_ARG(cs1),
                          OCL_ARG(has_c)};
        size_t gsz = (size_t)y->size;
        if ((s = ocl_launch(k, kern, 8, args, 1, &gsz, NULL))) return s;
    }
    return matmul_run(k, a, b, &g, y, &e);
}

/* ---- BiasAdd ---------------------------------------------------------------------------------------- */

static wf_status *k_bias_add(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *b = k->in[1];
    bool nchw = !strcmp(ocl_host->attr_get(k->op, k->attrs, "data_format")->s, "NCHW");
    int ax = nchw ? 1 : x->rank - 1;
    char sx[160], sb[160];
    if (x->rank < (nchw ? 2 : 1) || b->rank != 1 || x->dims[ax] != b->dims[0] || b->dtype != x->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "bias %s does not match channel dim %d of x %s",
                                   ocl_nnr_tstr(b, sb), ax, ocl_nnr_tstr(x, sx));
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_nnr_kernel(k, "nn_mm", g_src, x->dtype, "bias_add", &kern))) return s;
    cl_ulong C = (cl_ulong)b->dims[0], inner = 1;
    for (int i = ax + 1; i < x->rank; i++) inner *= (cl_ulong)x->dims[i];
    cl_mem xm = ocl_mem(x), bm = ocl_mem(b), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), bo = ocl_off(b), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(bm), OCL_ARG(bo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(C), OCL_ARG(inner)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 8, args, 1, &gsz, NULL);
}

/* ---- the table -------------------------------------------------------------------------------------- */

#define MM_DT (WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64))

const wf__kernel_def ocl_kernels_nn[] = {
    {"MatMul", "OPENCL", MM_DT, 0, k_matmul},
    {"Gemm", "OPENCL", MM_DT, 0, k_gemm},
    /* in place: work item i reads x[i] before it writes y[i] */
    {"BiasAdd", "OPENCL", WF__DT_NUMERIC, 0, k_bias_add, NULL, WF__K_INPLACE},
    {"Conv2D", "OPENCL", WF__DT_FLOATS, 0, ocl_nn_k_conv},
    {"ConvTranspose2D", "OPENCL", WF__DT_FLOATS, 0, ocl_nn_k_convt},
    {"MaxPool2D", "OPENCL", WF__DT_FLOATS, 0, ocl_nn_k_pool},
    {"AvgPool2D", "OPENCL", WF__DT_FLOATS, 0, ocl_nn_k_pool},
    {"GlobalAvgPool", "OPENCL", WF__DT_FLOATS, 0, ocl_nn_k_global_avg_pool},
    {0},
};
