/*
 * CPU kernels of ops_math.c that work along an axis or on whole matrices: Hardmax, LpNormalization
 * and Det. They are not bandwidth-bound loops, so they read every float dtype through double (exact
 * for all four) and keep one code path per op.
 */
#include "backends/cpu/k_math.h"

#include <math.h>
#include <string.h>

/* The input viewed as [outer, n, inner] around the axis; one "line" is n elements inner apart. */
typedef struct line_job {
    const void *x;
    void *y;
    wf_dtype t;
    int64_t n, inner;
    int p; /* LpNormalization */
} line_job;

static void axis_split(const wf_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
    *n = x->dims[axis];
}

static wf_status *get_axis(wf__kctx *k, int *axis)
{
    const wf_tensor *x = k->in[0];
    int64_t a = wf__attr_i(k->op, k->attrs, "axis");
    if (x->rank == 0 || !wf__norm_axis(a, x->rank, axis))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    return NULL;
}

/* Lines per parallel task: about 32K elements. */
static int64_t line_grain(int64_t n) { return n >= 32768 ? 1 : 32768 / (n > 0 ? n : 1); }

/* ---- Hardmax ------------------------------------------------------------------------------------ */

/* 1 at the first maximum of each line. A NaN counts as the maximum (numpy.argmax, which ONNX's
 * reference uses), so the first NaN wins. */
static void hardmax_lines(void *arg, int64_t l0, int64_t l1)
{
    const line_job *j = arg;
    for (int64_t l = l0; l < l1; l++) {
        int64_t base = (l / j->inner) * j->n * j->inner + l % j->inner;
        int64_t best = 0;
        double bv = wf__load_f64(j->x, j->t, base);
        for (int64_t i = 1; i < j->n && bv == bv; i++) {
            double v = wf__load_f64(j->x, j->t, base + i * j->inner);
            if (v > bv || v != v) {
                bv = v;
                best = i;
            }
        }
        for (int64_t i = 0; i < j->n; i++) wf__store_f64(j->y, j->t, base + i * j->inner, i == best ? 1.0 : 0.0);
    }
}

/* f32 lines read and written as floats (the loop above makes two calls an element): the same choice */
static void hardmax_lines_f32(void *arg, int64_t l0, int64_t l1)
{
    const line_job *j = arg;
    const float *x = j->x;
    float *y = j->y;
    int64_t n = j->n, in = j->inner;
    for (int64_t l = l0; l < l1; l++) {
        int64_t base = (l / in) * n * in + l % in, best = 0;
        float bv = x[base];
        for (int64_t i = 1; i < n && bv == bv; i++) {
            float v = x[base + i * in];
            if (v > bv || v != v) bv = v, best = i;
        }
        if (in == 1) {
            memset(y + base, 0, sizeof(float) * (size_t)n);
            y[base + best] = 1.0f;
        } else {
            for (int64_t i = 0; i < n; i++) y[base + i * in] = i == best ? 1.0f : 0.0f;
        }
    }
}

/* Lines inner values apart (an axis before the last) in blocks of AX_BLOCK neighbouring lines, walked row
 * by row: one line at a time read a cache line per element (Hardmax over axis 0 of 256 x 1024 f32: 2.5 ms,
 * ONNX Runtime 0.5). A task is one (outer index, block). */
#define AX_BLOCK 64

/* Task u's block: its first line's x and y (rows inner apart) and how many lines it has */
static int64_t ax_block(const line_job *j, int64_t u, const float **xb, float **yb)
{
    int64_t in = j->inner, blocks = (in + AX_BLOCK - 1) / AX_BLOCK, c0 = u % blocks * AX_BLOCK;
    int64_t off = u / blocks * j->n * in + c0;
    *xb = (const float *)j->x + off;
    *yb = (float *)j->y + off;
    return in - c0 < AX_BLOCK ? in - c0 : AX_BLOCK;
}

static void hardmax_rows_f32(void *arg, int64_t u0, int64_t u1)
{
    const line_job *j = arg;
    int64_t n = j->n, in = j->inner;
    for (int64_t u = u0; u < u1; u++) {
        const float *xb;
        float *yb, bv[AX_BLOCK];
        int64_t m = ax_block(j, u, &xb, &yb), best[AX_BLOCK];
        for (int64_t c = 0; c < m; c++) bv[c] = xb[c], best[c] = 0;
        for (int64_t i = 1; i < n; i++)
            for (int64_t c = 0; c < m; c++) {
                float v = xb[i * in + c];
                /* once a line's best is NaN it stays: the first NaN wins, as in the line loop */
                if (bv[c] == bv[c] && (v > bv[c] || v != v)) bv[c] = v, best[c] = i;
            }
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < m; c++) yb[i * in + c] = best[c] == i ? 1.0f : 0.0f;
    }
}

wf_status *wf__km_k_Hardmax(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int axis;
    WF__TRY(get_axis(k, &axis));
    /* Not in place: a line is read in full before it is written, but the output is written in full
     * too, and a separate buffer keeps the loop simple. */
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    int64_t outer, n, inner;
    axis_split(x, axis, &outer, &n, &inner);
    if (x->size == 0) return NULL;
    line_job j = {x->data, y->data, x->dtype, n, inner, 0};
    int64_t lines = outer * inner, g = line_grain(n);
    wf__range_fn fn = x->dtype == WF_F32 ? hardmax_lines_f32 : hardmax_lines;
    if (x->dtype == WF_F32 && inner > 1) {
        int64_t units = outer * ((inner + AX_BLOCK - 1) / AX_BLOCK), per = n * AX_BLOCK;
        wf__parallel_for(k, units, per >= 32768 ? 1 : 32768 / per, hardmax_rows_f32, &j);
        return NULL;
    }
    if (lines >= 2 * g)
        wf__parallel_for(k, lines, g, fn, &j);
    else
        fn(&j, 0, lines);
    return NULL;
}

/* ---- LpNormalization ---------------------------------------------------------------------------- */

/* x / ||x||_p per line in double; a zero norm gives 0 (ONNX defines it so, rather than 0/0). The norm
 * is complete before the line is written, so the output may be the input's buffer. */
static void lpnorm_lines(void *arg, int64_t l0, int64_t l1)
{
    const line_job *j = arg;
    for (int64_t l = l0; l < l1; l++) {
        int64_t base = (l / j->inner) * j->n * j->inner + l % j->inner;
        double s = 0;
        for (int64_t i = 0; i < j->n; i++) {
            double v = wf__load_f64(j->x, j->t, base + i * j->inner);
            s += j->p == 1 ? fabs(v) : v * v;
        }
        double norm = j->p == 1 ? s : sqrt(s);
        for (int64_t i = 0; i < j->n; i++) {
            double v = wf__load_f64(j->x, j->t, base + i * j->inner);
            wf__store_f64(j->y, j->t, base + i * j->inner, norm == 0 ? 0.0 : v / norm);
        }
    }
}

/* f32 lines read and written as floats, the norm in double as above: the same values */
static void lpnorm_lines_f32(void *arg, int64_t l0, int64_t l1)
{
    const line_job *j = arg;
    const float *x = j->x;
    float *y = j->y;
    int64_t n = j->n, in = j->inner;
    for (int64_t l = l0; l < l1; l++) {
        int64_t base = (l / in) * n * in + l % in;
        double s = 0;
        if (j->p == 1)
            for (int64_t i = 0; i < n; i++) s += fabs((double)x[base + i * in]);
        else
            for (int64_t i = 0; i < n; i++) s += (double)x[base + i * in] * (double)x[base + i * in];
        double norm = j->p == 1 ? s : sqrt(s);
        for (int64_t i = 0; i < n; i++) y[base + i * in] = norm == 0 ? 0.0f : (float)((double)x[base + i * in] / norm);
    }
}

static void lpnorm_rows_f32(void *arg, int64_t u0, int64_t u1)
{
    const line_job *j = arg;
    int64_t n = j->n, in = j->inner;
    for (int64_t u = u0; u < u1; u++) {
        const float *xb;
        float *yb;
        int64_t m = ax_block(j, u, &xb, &yb);
        double s[AX_BLOCK] = {0};
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < m; c++) {
                double v = xb[i * in + c];
                s[c] += j->p == 1 ? fabs(v) : v * v;
            }
        for (int64_t c = 0; c < m; c++) s[c] = j->p == 1 ? s[c] : sqrt(s[c]);
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < m; c++)
                yb[i * in + c] = s[c] == 0 ? 0.0f : (float)((double)xb[i * in + c] / s[c]);
    }
}

wf_status *wf__km_k_LpNormalization(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int axis;
    WF__TRY(get_axis(k, &axis));
    int64_t p = wf__attr_i(k->op, k->attrs, "p");
    if (p != 1 && p != 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "attribute 'p' must be 1 or 2, got %lld", (long long)p);
    wf_tensor *y;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, NULL));
    int64_t outer, n, inner;
    axis_split(x, axis, &outer, &n, &inner);
    if (x->size == 0) return NULL;
    line_job j = {x->data, y->data, x->dtype, n, inner, (int)p};
    int64_t lines = outer * inner, g = line_grain(n);
    wf__range_fn fn = x->dtype == WF_F32 ? lpnorm_lines_f32 : lpnorm_lines;
    if (x->dtype == WF_F32 && inner > 1) {
        int64_t units = outer * ((inner + AX_BLOCK - 1) / AX_BLOCK), per = n * AX_BLOCK;
        wf__parallel_for(k, units, per >= 32768 ? 1 : 32768 / per, lpnorm_rows_f32, &j);
        return NULL;
    }
    if (lines >= 2 * g)
        wf__parallel_for(k, lines, g, fn, &j);
    else
        fn(&j, 0, lines);
    return NULL;
}

/* ---- Det ---------------------------------------------------------------------------------------- */

typedef struct det_job {
    double *a; /* every matrix, converted to double; factorised in place */
    void *y;
    wf_dtype t;
    int64_t m;
} det_job;

/* LU with partial pivoting (as LAPACK's getrf, which numpy.linalg.det uses): the determinant is the
 * product of the pivots, negated once per row swap. */
static double det_lu(double *a, int64_t m)
{
    double det = 1.0;
    for (int64_t c = 0; c < m; c++) {
        int64_t piv = c;
        double best = fabs(a[c * m + c]);
        for (int64_t r = c + 1; r < m; r++)
            if (fabs(a[r * m + c]) > best) {
                best = fabs(a[r * m + c]);
                piv = r;
            }
        if (piv != c) {
            for (int64_t q = 0; q < m; q++) {
                double tmp = a[c * m + q];
                a[c * m + q] = a[piv * m + q];
                a[piv * m + q] = tmp;
            }
            det = -det;
        }
        double d = a[c * m + c];
        det *= d;
        if (d == 0) return det; /* singular: every later pivot is multiplied by 0 anyway */
        for (int64_t r = c + 1; r < m; r++) {
            double f = a[r * m + c] / d;
            if (f == 0) continue;
            for (int64_t q = c + 1; q < m; q++) a[r * m + q] -= f * a[c * m + q];
        }
    }
    return det;
}

static void det_range(void *arg, int64_t b0, int64_t b1)
{
    const det_job *j = arg;
    for (int64_t b = b0; b < b1; b++) wf__store_f64(j->y, j->t, b, det_lu(j->a + b * j->m * j->m, j->m));
}

wf_status *wf__km_k_Det(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char sh[160];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input must have square matrices [..., M, M], got %s",
                             wf__shape_str(x->rank, x->dims, sh));
    int64_t m = x->dims[x->rank - 1];
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank - 2, x->dims, &y));
    if (y->size == 0) return NULL;
    size_t bytes = (size_t)(x->size > 0 ? x->size : 1) * sizeof(double);
    double *a = wf__malloc(bytes);
    if (!a) return wf__status_wrap(wf__oom("Det's f64 workspace", bytes), "node '%s' (%s)", k->node, k->op->name);
    for (int64_t i = 0; i < x->size; i++) a[i] = wf__load_f64(x->data, x->dtype, i);
    det_job j = {a, y->data, x->dtype, m};
    /* about 2/3 m^3 flops a matrix; aim at ~64K flops per task */
    int64_t per = m * m * m > 0 ? m * m * m : 1, g = per >= 65536 ? 1 : 65536 / per;
    if (y->size >= 2 * g)
        wf__parallel_for(k, y->size, g, det_range, &j);
    else
        det_range(&j, 0, y->size);
    wf__free(a);
    return NULL;
}
