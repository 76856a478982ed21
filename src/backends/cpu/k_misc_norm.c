/*
 * CPU kernels of the misc group that compute along axes: InstanceNormalization, GroupNormalization,
 * LRN, MeanVarianceNormalization, RMSNormalization, Reduce{L1,SumSquare,LogSum,LogSumExp},
 * GlobalMaxPool, CumSum/CumProd and TopK. The general forms widen their input to f64 or i64 (k_misc.h), so
 * results are as accurate as numpy's float64 reference and integer arithmetic wraps like numpy's; the f32
 * forms of the common cases (the norms, LRN, L1 and LogSumExp along trailing axes, CumSum) compute in f32
 * vectors with f64 where sums grow long.
 */
#include "backends/cpu/k_misc.h"

/* the selects of the f32 row loops below (LRN, ReduceLogSumExp) vectorise only when GCC may evaluate both
 * arms; weft never unmasks floating-point exceptions */
#pragma GCC optimize("no-trapping-math")

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_vmath.h" /* after the pragma, or its functions would not inline */

#define SB WF__KM_SB

/* Narrows buf (f64, or i64 when is_int) into a new output 0 of dtype dt and shape. */
static wf_status *emit(wf__kctx *k, const void *buf, bool is_int, wf_dtype dt, int rank, const int64_t *dims)
{
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, dt, rank, dims, &y));
    wf__convert(buf, is_int ? WF_I64 : WF_F64, y->data, dt, y->size);
    return NULL;
}

/* ---- contiguous-group normalisation --------------------------------------------------------------- */

typedef struct {
    double *x;
    int64_t len;     /* elements per group */
    double eps;
    bool rms;        /* divide by the root mean square instead of centring by the variance */
} group_job;

static void group_range(void *arg, int64_t b, int64_t e)
{
    const group_job *j = arg;
    for (int64_t g = b; g < e; g++) {
        double *p = j->x + g * j->len, m = 0, v = 0;
        if (!j->rms) {
            for (int64_t i = 0; i < j->len; i++) m += p[i];
            m /= (double)j->len;
        }
        for (int64_t i = 0; i < j->len; i++) v += (p[i] - m) * (p[i] - m);
        double inv = 1.0 / sqrt(v / (double)j->len + j->eps);
        for (int64_t i = 0; i < j->len; i++) p[i] = (p[i] - m) * inv;
    }
}

static void norm_groups(wf__kctx *k, double *x, int64_t n, int64_t len, double eps, bool rms)
{
    group_job j = {.x = x, .len = len, .eps = eps, .rms = rms};
    if (n <= 0 || len <= 0) return;
    int64_t grain = WF__KM_GRAIN / len;
    wf__parallel_for(k, n / len, grain > 0 ? grain : 1, group_range, &j);
}

/* Checks that input idx is 1-D with n (or n2) values; returns the values as f64 in *v (caller frees). */
static wf_status *channel_vec(wf__kctx *k, int idx, const char *what, int64_t n, int64_t n2, double **v)
{
    const wf_tensor *p = k->in[idx], *x = k->in[0];
    char b0[SB], b1[SB];
    if (p->rank != 1 || (p->dims[0] != n && p->dims[0] != n2) || p->dtype != x->dtype)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s must be 1-D with %" PRId64 " values of input %s%s", what,
                             wf_dtype_name(p->dtype), wf__shape_str(p->rank, p->dims, b1), n, wf_dtype_name(x->dtype),
                             wf__shape_str(x->rank, x->dims, b0));
    return wf__km_widen(k, p, false, (void **)v);
}

/* y = x * scale[c] + bias[c] with c the channel (dim 1) of each element; per = elements per channel. */
static void affine(double *x, int64_t n, int64_t C, int64_t per, const double *scale, const double *bias)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (i / per) % C;
        x[i] = x[i] * scale[c] + bias[c];
    }
}

/* f32 InstanceNormalization and GroupNormalization: each (image, group) is (C / G) S contiguous values;
 * the mean, then the centred sum of squares (no cancellation), in 32 f32 lanes (explicit vectors, four
 * registers) over blocks of NORM_BLOCK values folded into f64; then y = (x - mean) (inv scale_c) + bias_c
 * a channel at a time. Through the f64 copy above InstanceNormalization of 8 x 64 x 32 x 32 took 10.2 ms
 * on 2 Zen 3 threads (ONNX Runtime 0.2). */
typedef float nv8 __attribute__((vector_size(32)));
typedef float nv8u __attribute__((vector_size(32), aligned(4)));
#define NORM_BLOCK 4096

/* sum of (p[i] - m)^k over n values, k 1 (m 0: the plain sum) or 2 */
WF__VEC static double nf_sum(const float *p, int64_t n, float m, bool sq)
{
    double total = 0;
    for (int64_t b = 0; b < n; b += NORM_BLOCK) {
        int64_t e = n - b > NORM_BLOCK ? b + NORM_BLOCK : n, i = b;
        nv8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (; i + 32 <= e; i += 32) {
            nv8 v0 = *(const nv8u *)(p + i) - m, v1 = *(const nv8u *)(p + i + 8) - m;
            nv8 v2 = *(const nv8u *)(p + i + 16) - m, v3 = *(const nv8u *)(p + i + 24) - m;
            if (sq) v0 *= v0, v1 *= v1, v2 *= v2, v3 *= v3;
            a0 += v0, a1 += v1, a2 += v2, a3 += v3;
        }
        nv8 a = (a0 + a2) + (a1 + a3);
        float l[8];
        memcpy(l, &a, sizeof l);
        for (; i < e; i++) total += sq ? (double)((p[i] - m) * (p[i] - m)) : (double)(p[i] - m);
        total += (double)(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])));
    }
    return total;
}

WF__VEC static void nf_apply(const float *x, float *y, int64_t n, float m, float a, float b)
{
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * a + b;
}

typedef struct {
    const float *x, *sc, *bi;
    float *y;
    int64_t G, cpg, S; /* groups, channels a group, values a channel */
    bool per_group;    /* opset 18 GroupNormalization: one scale and bias a group */
    double eps;
} nf_job;

static void nf_range(void *arg, int64_t g0, int64_t g1)
{
    const nf_job *j = arg;
    int64_t len = j->cpg * j->S;
    for (int64_t u = g0; u < g1; u++) {
        const float *x = j->x + u * len;
        float *y = j->y + u * len;
        double mean = nf_sum(x, len, 0.0f, false) / (double)len;
        float m = (float)mean;
        double var = nf_sum(x, len, m, true) / (double)len;
        float inv = (float)(1.0 / sqrt(var + j->eps));
        int64_t g = u % j->G;
        for (int64_t c = 0; c < j->cpg; c++) {
            int64_t ch = j->per_group ? g : g * j->cpg + c;
            nf_apply(x + c * j->S, y + c * j->S, j->S, m, inv * j->sc[ch], j->bi[ch]);
        }
    }
}

static wf_status *norm_common(wf__kctx *k, bool group)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int min_rank = group ? 2 : 3;
    if (x->rank < min_rank)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= %d", wf__shape_str(x->rank, x->dims, b), min_rank);
    int64_t C = x->dims[1], S = wf__numel(x->rank - 2, x->dims + 2), N = x->dims[0];
    int64_t G = group ? wf__attr_i(k->op, k->attrs, "num_groups") : C;
    if (G < 1 || C % G)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "num_groups %" PRId64 " must divide the channels of input %s", G,
                             wf__shape_str(x->rank, x->dims, b));
    double *xd = NULL, *sc = NULL, *bi = NULL;
    wf_status *s = channel_vec(k, 1, "scale", C, group ? G : C, &sc);
    if (!s) s = channel_vec(k, 2, group ? "bias" : "B", k->in[1]->dims[0], k->in[1]->dims[0], &bi);
    if (!s && x->dtype == WF_F32) {
        int64_t np = k->in[1]->dims[0];
        float *pf = wf__malloc(sizeof(float) * (size_t)(2 * np + 1));
        wf_tensor *y = NULL;
        if (!pf) s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the scale and bias (%" PRId64 " values)", 2 * np);
        if (!s) s = wf__kctx_output(k, 0, WF_F32, x->rank, x->dims, &y);
        if (!s && x->size) {
            for (int64_t i = 0; i < np; i++) pf[i] = (float)sc[i], pf[np + i] = (float)bi[i];
            nf_job j = {x->data, pf, pf + np, y->data, G, C / G, S, np != C, wf__attr_f(k->op, k->attrs, "epsilon")};
            int64_t len = (C / G) * S, grain = WF__KM_GRAIN / (len > 0 ? len : 1);
            wf__parallel_for(k, N * G, grain > 0 ? grain : 1, nf_range, &j);
        }
        wf__free(pf);
        wf__free(sc);
        wf__free(bi);
        return s;
    }
    if (!s) s = wf__km_widen(k, x, false, (void **)&xd);
    if (!s) {
        double eps = wf__attr_f(k->op, k->attrs, "epsilon");
        norm_groups(k, xd, N * C * S, (C / G) * S, eps, false);
        /* Opset 18 GroupNormalization: one scale and bias per group. */
        bool per_group = k->in[1]->dims[0] != C;
        affine(xd, x->size, per_group ? G : C, per_group ? (C / G) * S : S, sc, bi);
        s = emit(k, xd, false, x->dtype, x->rank, x->dims);
    }
    wf__free(xd);
    wf__free(sc);
    wf__free(bi);
    return s;
}

wf_status *wf__k_instancenorm(wf__kctx *k) { return norm_common(k, false); }
wf_status *wf__k_groupnorm(wf__kctx *k) { return norm_common(k, true); }

/* f32 RMSNormalization: per row of M, the squares summed in f32 lanes (so they overflow where the chain
 * x * rsqrt(mean(x^2) + eps) of f32 nodes overflows) and the lanes in double, inv = 1 / sqrt(mean + eps)
 * rounded once to f32, y = x * inv * s: the chain's products. The f64 widening below cost an LLaMA-style
 * model's norms as much as its attention. */
typedef struct {
    const float *x, *s;
    float *y;
    int64_t M;
    double eps;
} rms_f32;

WF__VEC static void rms_row_f32(const float *x, float *y, const float *s, int64_t M, double eps)
{
    enum { L = 16 };
    float acc[L] = {0};
    int64_t i = 0;
    for (; i + L <= M; i += L)
        for (int j = 0; j < L; j++) acc[j] += x[i + j] * x[i + j];
    double sum = 0;
    for (; i < M; i++) sum += (double)(x[i] * x[i]);
    for (int j = 0; j < L; j++) sum += acc[j];
    float inv = (float)(1.0 / sqrt(sum / (double)M + eps));
    _Pragma("omp simd") for (int64_t c = 0; c < M; c++) y[c] = x[c] * inv * s[c];
}

/* The element of scale p (broadcast right-aligned onto X's last nr dims) at element i of one row. */
static int64_t scale_offset(const wf_tensor *p, const wf_tensor *x, int nr, int64_t i)
{
    int64_t pst[WF_MAX_RANK], r = i, off = 0;
    wf__strides(p->rank, p->dims, pst);
    for (int d = 0; d < nr; d++) {
        int xd_i = x->rank - 1 - d, pd_i = p->rank - 1 - d;
        int64_t c = r % x->dims[xd_i];
        r /= x->dims[xd_i];
        if (pd_i >= 0 && p->dims[pd_i] != 1) off += c * pst[pd_i];
    }
    return off;
}

static void rms_range(void *arg, int64_t b, int64_t e)
{
    const rms_f32 *r = arg;
    for (int64_t u = b; u < e; u++) rms_row_f32(r->x + u * r->M, r->y + u * r->M, r->s, r->M, r->eps);
}

wf_status *wf__k_rmsnorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *p = k->in[1];
    char b0[SB], b1[SB];
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    int a;
    if (!wf__norm_axis(axis, x->rank, &a))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                             wf__shape_str(x->rank, x->dims, b0));
    int nr = x->rank - a;
    bool ok = p->rank <= nr && p->dtype == x->dtype;
    for (int d = 0; ok && d < p->rank; d++)
        if (p->dims[p->rank - 1 - d] != 1 && p->dims[p->rank - 1 - d] != x->dims[x->rank - 1 - d]) ok = false;
    if (!ok)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "scale %s does not broadcast to the normalised dims of X %s",
                             wf__shape_str(p->rank, p->dims, b1), wf__shape_str(x->rank, x->dims, b0));
    int64_t M = wf__numel(nr, x->dims + a);
    if (x->dtype == WF_F32 && M > 0) {
        float *sf = wf__malloc(sizeof(float) * (size_t)M);
        if (!sf) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the broadcast scale (%" PRId64 " floats)", M);
        for (int64_t i = 0; i < M; i++) sf[i] = ((const float *)p->data)[scale_offset(p, x, nr, i)];
        wf_tensor *y;
        bool reused;
        wf_status *st = wf__kctx_output_reuse(k, 0, 0, WF_F32, x->rank, x->dims, &y, &reused);
        if (!st && x->size) {
            rms_f32 r = {x->data, sf, y->data, M, wf__attr_f(k->op, k->attrs, "epsilon")};
            wf__parallel_for(k, x->size / M, M >= 4096 ? 1 : 4096 / M, rms_range, &r);
        }
        wf__free(sf);
        return st;
    }
    double *xd = NULL, *pd = NULL, *full = NULL;
    wf_status *s = wf__km_widen(k, x, false, (void **)&xd);
    if (!s) s = wf__km_widen(k, p, false, (void **)&pd);
    if (!s) s = wf__km_alloc8(k, M, "the broadcast scale", (void **)&full);
    if (!s) {
        /* Expand scale over the normalised block once. */
        for (int64_t i = 0; i < M; i++) full[i] = pd[scale_offset(p, x, nr, i)];
        norm_groups(k, xd, x->size, M, wf__attr_f(k->op, k->attrs, "epsilon"), true);
        for (int64_t i = 0; i < x->size; i++) xd[i] *= full[i % M];
        s = emit(k, xd, false, x->dtype, x->rank, x->dims);
    }
    wf__free(xd);
    wf__free(pd);
    wf__free(full);
    return s;
}

/* f32 LRN a plane at a time: the window's sum of squares in f32 (size terms), then x * t^-beta as
 * x * exp(-beta log t) through the vector forms of k_vmath.h. Through the f64 copy and pow (the loop
 * below) size 5 over 8 x 64 x 32 x 32 took 12.7 ms on 2 Zen 5 threads, this 0.50 (ONNX Runtime 7.4;
 * bench_ops.py). A NaN or Inf stays where the f64 form puts it: inf / inf and 0 / 0 are NaN either way. */
typedef struct {
    const float *x;
    float *y;
    int64_t C, S, lo, hi;
    float bias, a, nb; /* a = alpha / size, nb = -beta */
} lrn_job;

#define LRN_CHUNK 512

/* one output plane, LRN_CHUNK positions at a time: the window's squares summed plane by plane (the
 * vectorisable order), then the scale */
WF__VEC static void lrn_plane(const lrn_job *j, const float *x0, float *y, int64_t c)
{
    const int64_t S = j->S, q0 = c - j->lo < 0 ? 0 : c - j->lo, q1 = c + j->hi >= j->C ? j->C - 1 : c + j->hi;
    const float *xc = x0 + c * S;
    float sq[LRN_CHUNK];
    for (int64_t i0 = 0; i0 < S; i0 += LRN_CHUNK) {
        int64_t m = S - i0 < LRN_CHUNK ? S - i0 : LRN_CHUNK;
        const float bias = j->bias, a = j->a, nb = j->nb;
        _Pragma("omp simd") for (int64_t i = 0; i < m; i++) sq[i] = 0;
        for (int64_t q = q0; q <= q1; q++) {
            const float *xq = x0 + q * S + i0;
            _Pragma("omp simd") for (int64_t i = 0; i < m; i++) sq[i] += xq[i] * xq[i];
        }
        _Pragma("omp simd") for (int64_t i = 0; i < m; i++) y[i0 + i] = xc[i0 + i] * ew_expf(nb * ew_logf(bias + a * sq[i]));
    }
}

static void lrn_range(void *arg, int64_t b, int64_t e)
{
    const lrn_job *j = arg;
    for (int64_t p = b; p < e; p++) {
        int64_t n = p / j->C, c = p % j->C;
        lrn_plane(j, j->x + n * j->C * j->S, j->y + p * j->S, c);
    }
}

wf_status *wf__k_lrn(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    if (x->rank < 3)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 3", wf__shape_str(x->rank, x->dims, b));
    int64_t size = wf__attr_i(k->op, k->attrs, "size");
    double alpha = wf__attr_f(k->op, k->attrs, "alpha"), beta = wf__attr_f(k->op, k->attrs, "beta"),
           bias = wf__attr_f(k->op, k->attrs, "bias");
    int64_t N = x->dims[0], C = x->dims[1], S = wf__numel(x->rank - 2, x->dims + 2);
    int64_t lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size - 1) / 2 */
    if (x->dtype == WF_F32) {
        wf_tensor *y;
        WF__TRY(wf__kctx_output(k, 0, WF_F32, x->rank, x->dims, &y));
        lrn_job j = {x->data, y->data, C, S, lo, hi, (float)bias, (float)(alpha / (double)size), (float)-beta};
        if (x->size) wf__parallel_for(k, N * C, S >= 8192 ? 1 : 8192 / S, lrn_range, &j);
        return NULL;
    }
    double *xd = NULL, *yd = NULL;
    wf_status *s = wf__km_widen(k, x, false, (void **)&xd);
    if (!s) s = wf__km_alloc8(k, x->size, "the LRN output", (void **)&yd);
    if (!s) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < S; i++) {
                    double sq = 0;
                    for (int64_t q = c - lo; q <= c + hi; q++)
                        if (q >= 0 && q < C) {
                            double v = xd[(n * C + q) * S + i];
                            sq += v * v;
                        }
                    int64_t o = (n * C + c) * S + i;
                    yd[o] = xd[o] / pow(bias + alpha / (double)size * sq, beta);
                }
        s = emit(k, yd, false, x->dtype, x->rank, x->dims);
    }
    wf__free(xd);
    wf__free(yd);
    return s;
}

/* Normalised axes mask from an INTS attribute, or def when it is empty. */
static wf_status *mask_from(wf__kctx *k, const int64_t *v, int n, int rank, unsigned *mask)
{
    *mask = 0;
    for (int i = 0; i < n; i++) {
        int a;
        if (!wf__norm_axis(v[i], rank, &a) || (*mask & (1u << a)))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range or repeated for rank %d", v[i], rank);
        *mask |= 1u << a;
    }
    return NULL;
}

wf_status *wf__k_mvn(wf__kctx *k)
{
    static const int64_t def[3] = {0, 2, 3};
    const wf_tensor *x = k->in[0];
    const wf__attr *ax = wf__attr_get(k->op, k->attrs, "axes");
    unsigned mask;
    WF__TRY(mask_from(k, ax->n ? ax->ints : def, ax->n ? ax->n : 3, x->rank, &mask));
    unsigned all = x->rank ? (1u << x->rank) - 1 : 0;
    int64_t *ro = NULL, *ko = NULL, nr, nk;
    double *xd = NULL;
    wf_status *s = wf__km_offsets(k, x->rank, x->dims, mask, &ro, &nr);
    if (!s) s = wf__km_offsets(k, x->rank, x->dims, all & ~mask, &ko, &nk);
    if (!s) s = wf__km_widen(k, x, false, (void **)&xd);
    if (!s && x->size) {
        for (int64_t q = 0; q < nk; q++) {
            double *p = xd + ko[q], m = 0, v = 0;
            for (int64_t i = 0; i < nr; i++) m += p[ro[i]];
            m /= (double)nr;
            for (int64_t i = 0; i < nr; i++) v += (p[ro[i]] - m) * (p[ro[i]] - m);
            /* ONNX's function body: (X - mean) / (sqrt(var) + 1e-9) */
            double den = sqrt(v / (double)nr) + 1e-9;
            for (int64_t i = 0; i < nr; i++) p[ro[i]] = (p[ro[i]] - m) / den;
        }
    }
    if (!s) s = emit(k, xd, false, x->dtype, x->rank, x->dims);
    wf__free(ro);
    wf__free(ko);
    wf__free(xd);
    return s;
}

/* ---- Reduce{L1,SumSquare,LogSum,LogSumExp} --------------------------------------------------------- */

enum { R_L1, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP };

/* f32 ReduceL1 and ReduceLogSumExp over trailing axes (rows of contiguous values): sums of |x| and of
 * exp(x - max) in f32 lanes over blocks of RED_BLOCK terms, folded into f64; the max in f32 with NaN
 * tracked apart. Along the last axis of 256 x 1024 on 2 Zen 5 threads (bench_ops.py), through the f64 copy
 * (the loop below) and this: L1 0.42 -> 0.009 ms, LogSumExp 2.1 -> 0.12 (ONNX Runtime 0.12 and 0.74). */
#define RED_BLOCK 1024

WF__VEC static double row_l1_f32(const float *p, int64_t n)
{
    double total = 0;
    for (int64_t b = 0; b < n; b += RED_BLOCK) {
        int64_t e = n - b > RED_BLOCK ? b + RED_BLOCK : n;
        float acc = 0;
        _Pragma("omp simd reduction(+ : acc)") for (int64_t i = b; i < e; i++) acc += fabsf(p[i]);
        total += acc;
    }
    return total;
}

/* log(sum exp(x)) of a row, n >= 1: the max when it is +-Inf or NaN (a NaN, +Inf, or an all -Inf row) */
WF__VEC static double row_lse_f32(const float *p, int64_t n)
{
    float m = -INFINITY;
    int nan = 0;
    _Pragma("omp simd reduction(max : m) reduction(| : nan)") for (int64_t i = 0; i < n; i++) {
        m = p[i] > m ? p[i] : m;
        nan |= p[i] != p[i];
    }
    if (nan) return NAN;
    if (m == INFINITY || m == -INFINITY) return m;
    double total = 0;
    for (int64_t b = 0; b < n; b += RED_BLOCK) {
        int64_t e = n - b > RED_BLOCK ? b + RED_BLOCK : n;
        float acc = 0;
        _Pragma("omp simd reduction(+ : acc)") for (int64_t i = b; i < e; i++) acc += ew_expf(p[i] - m);
        total += acc;
    }
    return log(total) + m;
}

typedef struct {
    const float *x;
    float *y;
    int64_t len;
    bool lse;
} red_rows_job;

static void red_rows_range(void *arg, int64_t b, int64_t e)
{
    const red_rows_job *j = arg;
    for (int64_t r = b; r < e; r++)
        j->y[r] = (float)(j->lse ? row_lse_f32(j->x + r * j->len, j->len) : row_l1_f32(j->x + r * j->len, j->len));
}

/* The same over leading or middle axes: len rows of inner values (x[r * inner + q]) reduced into inner
 * outputs, RED_TILE columns at a time; the sums in f32 over RED_ROWS rows, folded into f64; LogSumExp
 * takes each column's max (and whether it holds a NaN) in a first pass over the tile. 256 x 1024 along
 * axis 0 on 2 Zen 5 threads (bench_ops.py), through the f64 copy and this: L1 0.94 -> 0.022 ms, LogSumExp
 * 2.0 -> 0.105 (ONNX Runtime 0.32-0.37 and 0.92-0.99). */
#define RED_TILE 256
#define RED_ROWS 64

typedef struct {
    const float *x;
    float *y;
    int64_t len, inner, tiles;
    bool lse;
} red_cols_job;

WF__VEC static void red_cols_tile(const red_cols_job *j, const float *x, float *y, int64_t w)
{
    const int64_t Q = j->inner, R = j->len;
    float m[RED_TILE], acc[RED_TILE];
    double tot[RED_TILE];
    int nan[RED_TILE];
    for (int64_t q = 0; q < w; q++) m[q] = j->lse ? -INFINITY : 0.0f, nan[q] = 0, tot[q] = 0;
    if (j->lse)
        for (int64_t r = 0; r < R; r++) {
            const float *p = x + r * Q;
            _Pragma("omp simd") for (int64_t q = 0; q < w; q++) {
                m[q] = p[q] > m[q] ? p[q] : m[q];
                nan[q] |= p[q] != p[q];
            }
        }
    for (int64_t r0 = 0; r0 < R; r0 += RED_ROWS) {
        int64_t r1 = R - r0 > RED_ROWS ? r0 + RED_ROWS : R;
        _Pragma("omp simd") for (int64_t q = 0; q < w; q++) acc[q] = 0;
        for (int64_t r = r0; r < r1; r++) {
            const float *p = x + r * Q;
            if (j->lse) {
                _Pragma("omp simd") for (int64_t q = 0; q < w; q++) acc[q] += ew_expf(p[q] - m[q]);
            } else {
                _Pragma("omp simd") for (int64_t q = 0; q < w; q++) acc[q] += fabsf(p[q]);
            }
        }
        for (int64_t q = 0; q < w; q++) tot[q] += acc[q];
    }
    for (int64_t q = 0; q < w; q++) {
        if (!j->lse) y[q] = (float)tot[q];
        /* a NaN, +Inf or an all -Inf column: the max is the answer, as in row_lse_f32 */
        else y[q] = nan[q] ? NAN : m[q] == INFINITY || m[q] == -INFINITY ? m[q] : (float)(log(tot[q]) + m[q]);
    }
}

static void red_cols_range(void *arg, int64_t b, int64_t e)
{
    const red_cols_job *j = arg;
    for (int64_t u = b; u < e; u++) {
        int64_t o = u / j->tiles, q0 = u % j->tiles * RED_TILE;
        int64_t w = j->inner - q0 < RED_TILE ? j->inner - q0 : RED_TILE;
        red_cols_tile(j, j->x + o * j->len * j->inner + q0, j->y + o * j->inner + q0, w);
    }
}

wf_status *wf__k_reduce_misc(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    const char *nm = k->op->name;
    int op = !strcmp(nm, "ReduceL1") ? R_L1 : !strcmp(nm, "ReduceSumSquare") ? R_SUMSQ
           : !strcmp(nm, "ReduceLogSum") ? R_LOGSUM : R_LOGSUMEXP;
    const wf__attr *aa = wf__attr_get(k->op, k->attrs, "axes");
    int64_t axes[WF_MAX_RANK];
    int n = 0;
    if (aa->set) {
        n = aa->n;
        memcpy(axes, aa->ints, sizeof(int64_t) * (size_t)n);
    } else if (wf__km_has(k, 1)) {
        const wf_tensor *t = k->in[1];
        if ((t->dtype != WF_I64 && t->dtype != WF_I32) || t->rank > 1 || t->size > WF_MAX_RANK)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axes input must be 1-D i64 or i32 with at most %d values", WF_MAX_RANK);
        n = (int)t->size;
        for (int i = 0; i < n; i++) axes[i] = wf__load_i64(t->data, t->dtype, i);
    }
    bool keep = wf__attr_i(k->op, k->attrs, "keepdims") != 0;
    unsigned mask = 0, all = x->rank ? (1u << x->rank) - 1 : 0;
    for (int i = 0; i < n; i++) {
        int a;
        if (!wf__norm_axis(axes[i], x->rank, &a) || (mask & (1u << a)))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range or repeated for input %s",
                                 axes[i], wf__shape_str(x->rank, x->dims, b));
        mask |= 1u << a;
    }
    if (!n) {
        if (wf__attr_i(k->op, k->attrs, "noop_with_empty_axes")) mask = 0;
        else mask = all;
    }
    /* float sums of squares and log-sums that reduce something: k_reduce.c's loops (with no axis, the
     * elementwise part alone stays here) */
    if (wf__dtype_is_float(x->dtype) && mask && op == R_SUMSQ) return wf__k_reduce_sum_square_float(k);
    if (wf__dtype_is_float(x->dtype) && mask && op == R_LOGSUM) return wf__k_reduce_log_sum_float(k);
    int64_t yd[WF_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        if (!(mask & (1u << d))) yd[r++] = x->dims[d];
        else if (keep) yd[r++] = 1;
    }
    /* f32 L1 / LogSumExp over one run of adjacent axes (mask, shifted down, is 2^k - 1): [outer, len, inner];
     * rows of len contiguous values where inner is 1, else columns of inner-wide tiles */
    unsigned run = mask ? mask >> __builtin_ctz(mask) : 0;
    if (x->dtype == WF_F32 && (op == R_L1 || op == R_LOGSUMEXP) && mask && !(run & (run + 1))) {
        int64_t len = 1, inner = 1;
        for (int d = 0; d < x->rank; d++) {
            if (mask & (1u << d)) len *= x->dims[d];
            else if (d > __builtin_ctz(mask)) inner *= x->dims[d];
        }
        wf_tensor *y;
        WF__TRY(wf__kctx_output(k, 0, WF_F32, r, yd, &y));
        if (!y->size) return NULL;
        if (len > 0 && inner == 1) {
            red_rows_job j = {x->data, y->data, len, op == R_LOGSUMEXP};
            wf__parallel_for(k, y->size, len >= 8192 ? 1 : 8192 / len, red_rows_range, &j);
        } else if (len > 0) {
            int64_t tiles = (inner + RED_TILE - 1) / RED_TILE;
            red_cols_job j = {x->data, y->data, len, inner, tiles, op == R_LOGSUMEXP};
            int64_t per = len * RED_TILE;
            wf__parallel_for(k, y->size / inner * tiles, per >= 16384 ? 1 : 16384 / per, red_cols_range, &j);
        } else {
            for (int64_t q = 0; q < y->size; q++) ((float *)y->data)[q] = op == R_L1 ? 0.0f : -INFINITY;
        }
        return NULL;
    }
    bool is_int = !wf__dtype_is_float(x->dtype);
    int64_t *ro = NULL, *ko = NULL, nr, nk;
    void *xb = NULL, *out = NULL;
    wf_status *s = wf__km_offsets(k, x->rank, x->dims, mask, &ro, &nr);
    if (!s) s = wf__km_offsets(k, x->rank, x->dims, all & ~mask, &ko, &nk);
    if (!s) s = wf__km_widen(k, x, is_int && op <= R_SUMSQ, &xb);
    if (!s) s = wf__km_alloc8(k, nk, "the reduction output", &out);
    if (!s) {
        if (is_int && op <= R_SUMSQ) {
            const int64_t *xi = xb;
            for (int64_t q = 0; q < nk; q++) {
                uint64_t acc = 0;
                for (int64_t i = 0; i < nr; i++) {
                    uint64_t v = (uint64_t)xi[ko[q] + ro[i]];
                    acc += op == R_L1 ? (xi[ko[q] + ro[i]] < 0 ? 0 - v : v) : v * v;
                }
                ((int64_t *)out)[q] = (int64_t)acc;
            }
        } else {
            const double *xf = xb;
            for (int64_t q = 0; q < nk; q++) {
                const double *p = xf + (x->size ? ko[q] : 0);
                double acc = 0, m = -INFINITY;
                if (op == R_LOGSUMEXP) {
                    for (int64_t i = 0; i < nr; i++) m = (p[ro[i]] > m || p[ro[i]] != p[ro[i]]) ? p[ro[i]] : m;
                    if (isinf(m) || isnan(m)) {
                        ((double *)out)[q] = m; /* all -inf, empty, +inf or NaN: the max is the answer */
                        continue;
                    }
                }
                for (int64_t i = 0; i < nr; i++) {
                    double v = p[ro[i]];
                    acc += op == R_L1 ? fabs(v) : op == R_SUMSQ ? v * v : op == R_LOGSUM ? v : exp(v - m);
                }
                ((double *)out)[q] = op == R_LOGSUM ? log(acc) : op == R_LOGSUMEXP ? log(acc) + m : acc;
            }
        }
        s = emit(k, out, is_int && op <= R_SUMSQ, x->dtype, r, yd);
    }
    wf__free(ro);
    wf__free(ko);
    wf__free(xb);
    wf__free(out);
    return s;
}

wf_status *wf__k_global_max_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    if (x->rank < 3)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 3", wf__shape_str(x->rank, x->dims, b));
    if (wf__dtype_is_float(x->dtype)) return wf__k_global_max_pool_float(k);
    int64_t yd[WF_MAX_RANK], S = wf__numel(x->rank - 2, x->dims + 2), NC = x->dims[0] * x->dims[1];
    for (int d = 0; d < x->rank; d++) yd[d] = d < 2 ? x->dims[d] : 1;
    double *xd = NULL, *out = NULL;
    wf_status *s = wf__km_widen(k, x, false, (void **)&xd);
    if (!s) s = wf__km_alloc8(k, NC, "the pooled output", (void **)&out);
    if (!s) {
        for (int64_t q = 0; q < NC; q++) {
            double m = -INFINITY;
            for (int64_t i = 0; i < S; i++) m = (xd[q * S + i] > m || xd[q * S + i] != xd[q * S + i]) ? xd[q * S + i] : m;
            out[q] = m;
        }
        s = emit(k, out, false, x->dtype, x->rank, yd);
    }
    wf__free(xd);
    wf__free(out);
    return s;
}

/* ---- CumSum / CumProd ------------------------------------------------------------------------------------ */

typedef struct {
    void *buf;         /* widened input, becomes the inclusive scan */
    void *out;         /* widened output (exclusive scans; an inclusive one is buf) */
    bool is_int, prod, excl, rev;
    int64_t D, inner, iblocks;
} cum_job;

/* Values of a row a task scans: a task is one (outer index, block of CUM_IBLOCK inner positions). */
#define CUM_IBLOCK 512

/* Row by row along the axis (each row CUM_IBLOCK contiguous inner positions, one pass each, vectorised)
 * rather than each inner position walked down the axis inner values apart: CumSum along axis 0 of
 * 256 x 1024 f32 took 8.2 ms that way (ONNX Runtime 0.08). The sums and products are those of the walk
 * (the same operations in the same order per position). */
static void cum_range(void *arg, int64_t b, int64_t e)
{
    const cum_job *j = arg;
    int64_t D = j->D, in = j->inner;
    for (int64_t u = b; u < e; u++) {
        int64_t o = u / j->iblocks, i0 = u % j->iblocks * CUM_IBLOCK, n = in - i0 < CUM_IBLOCK ? in - i0 : CUM_IBLOCK;
        int64_t base = o * D * in + i0;
        for (int64_t t = 1; t < D; t++) {
            int64_t p = (j->rev ? D - 1 - t : t) * in, q = (j->rev ? D - t : t - 1) * in; /* row, previous row */
            if (j->is_int) {
                uint64_t *x = (uint64_t *)j->buf + base;
                if (j->prod) for (int64_t i = 0; i < n; i++) x[p + i] *= x[q + i];
                else for (int64_t i = 0; i < n; i++) x[p + i] += x[q + i];
            } else {
                double *x = (double *)j->buf + base;
                if (j->prod) for (int64_t i = 0; i < n; i++) x[p + i] = x[q + i] * x[p + i];
                else for (int64_t i = 0; i < n; i++) x[p + i] = x[q + i] + x[p + i];
            }
        }
        if (!j->excl || !D) continue;
        /* exclusive: each row the inclusive scan's previous row, the first the identity */
        int64_t first = (j->rev ? D - 1 : 0) * in;
        for (int64_t i = 0; i < n; i++) {
            if (j->is_int) ((int64_t *)j->out)[base + first + i] = j->prod ? 1 : 0;
            else ((double *)j->out)[base + first + i] = j->prod ? 1.0 : 0.0;
        }
        for (int64_t t = 1; t < D; t++) {
            int64_t p = (j->rev ? D - 1 - t : t) * in, q = (j->rev ? D - t : t - 1) * in;
            memcpy((char *)j->out + (size_t)(base + p) * 8, (const char *)j->buf + (size_t)(base + q) * 8, (size_t)n * 8);
        }
    }
}

/* f32: read x and write y directly, a block of inner positions' running values in f64 on the stack: the
 * values of the widened path (the same f64 operations, one rounding at the store) without its two copies. */
typedef struct {
    const float *x;
    float *y;
    bool prod, excl, rev;
    int64_t D, inner, iblocks;
} cumf_job;

/* `omp simd` on each position loop: at -O2 GCC left them scalar (CumSum of 256 x 1024 along axis 0 on 2 Zen
 * 5 threads: 0.22 -> 0.048 ms, ONNX Runtime 0.045); along the last axis a plain running value */
WF__VEC static void cumf_range(void *arg, int64_t b, int64_t e)
{
    const cumf_job *j = arg;
    int64_t D = j->D, in = j->inner;
    double acc[CUM_IBLOCK];
    for (int64_t u = b; u < e; u++) {
        int64_t o = u / j->iblocks, i0 = u % j->iblocks * CUM_IBLOCK, n = in - i0 < CUM_IBLOCK ? in - i0 : CUM_IBLOCK;
        const float *x = j->x + o * D * in + i0;
        float *y = j->y + o * D * in + i0;
        const double init = j->prod ? 1.0 : 0.0;
        if (n == 1) { /* along the last axis: one running value, no vector set-up per step */
            double a = init;
            for (int64_t t = 0; t < D; t++) {
                int64_t p = j->rev ? D - 1 - t : t;
                float v = x[p];
                if (j->excl) y[p] = (float)a;
                a = j->prod ? a * v : a + v;
                if (!j->excl) y[p] = (float)a;
            }
            continue;
        }
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) acc[i] = init;
        for (int64_t t = 0; t < D; t++) {
            int64_t p = (j->rev ? D - 1 - t : t) * in;
            if (j->excl) _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[p + i] = (float)acc[i];
            if (j->prod) {
                _Pragma("omp simd") for (int64_t i = 0; i < n; i++) acc[i] = acc[i] * x[p + i];
            } else {
                _Pragma("omp simd") for (int64_t i = 0; i < n; i++) acc[i] = acc[i] + x[p + i];
            }
            if (!j->excl) _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[p + i] = (float)acc[i];
        }
    }
}

wf_status *wf__k_cumsum(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t axis;
    int a;
    WF__TRY(wf__km_scalar_int(k, 1, "axis", &axis));
    if (!wf__norm_axis(axis, x->rank, &a))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                             wf__shape_str(x->rank, x->dims, b));
    cum_job j = {.is_int = !wf__dtype_is_float(x->dtype), .prod = !strcmp(k->op->name, "CumProd"),
                 .excl = wf__attr_i(k->op, k->attrs, "exclusive") != 0,
                 .rev = wf__attr_i(k->op, k->attrs, "reverse") != 0, .D = x->dims[a],
                 .inner = wf__numel(x->rank - a - 1, x->dims + a + 1)};
    if (x->dtype == WF_F32) {
        wf_tensor *y;
        WF__TRY(wf__kctx_output(k, 0, WF_F32, x->rank, x->dims, &y));
        cumf_job f = {x->data, y->data, j.prod, j.excl, j.rev, j.D, j.inner, (j.inner + CUM_IBLOCK - 1) / CUM_IBLOCK};
        if (x->size) {
            int64_t per = j.D * (j.inner < CUM_IBLOCK ? j.inner : CUM_IBLOCK), grain = WF__KM_GRAIN / (per ? per : 1);
            wf__parallel_for(k, wf__numel(a, x->dims) * f.iblocks, grain > 0 ? grain : 1, cumf_range, &f);
        }
        return NULL;
    }
    wf_status *s = wf__km_widen(k, x, j.is_int, &j.buf);
    if (!s && j.excl) s = wf__km_alloc8(k, x->size, "the scan", &j.out);
    if (!s) {
        int64_t outer = wf__numel(a, x->dims);
        j.iblocks = (j.inner + CUM_IBLOCK - 1) / CUM_IBLOCK;
        if (x->size) {
            int64_t per = j.D * (j.inner < CUM_IBLOCK ? j.inner : CUM_IBLOCK), grain = WF__KM_GRAIN / (per ? per : 1);
            wf__parallel_for(k, outer * j.iblocks, grain > 0 ? grain : 1, cum_range, &j);
        }
        s = emit(k, j.excl ? j.out : j.buf, j.is_int, x->dtype, x->rank, x->dims);
    }
    wf__free(j.buf);
    wf__free(j.out);
    return s;
}

/* ---- TopK ---------------------------------------------------------------------------------------------- */

typedef struct {
    union {
        double d;
        int64_t i;
    } v;
    int64_t idx;
} kv_t;

/* The float order as "a goes before b": NaN counts as the largest value and equal values keep the lower
 * index first, as the ONNX reference (a stable lexsort). Inline, so the f32 heap (tk_sift) compares without
 * a call; the qsort comparators below are made of it. */
static inline __attribute__((always_inline)) bool tk_before(const kv_t *a, const kv_t *b, bool largest)
{
    bool an = a->v.d != a->v.d, bn = b->v.d != b->v.d;
    if (an != bn) return largest ? an : bn;
    if (!an && a->v.d != b->v.d) return largest ? a->v.d > b->v.d : a->v.d < b->v.d;
    return a->idx < b->idx;
}

/* Orders for "largest first" and "smallest first" */
static int cmp_f_large(const void *a, const void *b) { return tk_before(a, b, true) ? -1 : tk_before(b, a, true); }
static int cmp_f_small(const void *a, const void *b) { return tk_before(a, b, false) ? -1 : tk_before(b, a, false); }

static int cmp_i_large(const void *pa, const void *pb)
{
    const kv_t *a = pa, *b = pb;
    if (a->v.i != b->v.i) return a->v.i > b->v.i ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_i_small(const void *pa, const void *pb)
{
    const kv_t *a = pa, *b = pb;
    if (a->v.i != b->v.i) return a->v.i < b->v.i ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

typedef struct {
    const void *x;        /* widened */
    const float *xf32;    /* or, for contiguous f32 lines with K * 8 <= D, the input itself */
    void *vals;           /* widened output values [outer, K, inner] */
    int64_t *idx;
    bool is_int;
    int (*cmp)(const void *, const void *);
    bool largest;
    int64_t D, K, inner;
    atomic_bool oom;
} topk_job;

/* Heap of the n best so far under cmp with the worst at h[0] (cmp(h[0], any) >= 0): sift h[p] down. */
static void topk_sift(kv_t *h, int64_t n, int64_t p, int (*cmp)(const void *, const void *))
{
    for (;;) {
        int64_t c = 2 * p + 1;
        if (c >= n) return;
        if (c + 1 < n && cmp(&h[c + 1], &h[c]) > 0) c++;
        if (cmp(&h[c], &h[p]) <= 0) return;
        kv_t t = h[p];
        h[p] = h[c];
        h[c] = t;
        p = c;
    }
}

/* Whether a value at a later index than every heap entry goes before the heap's worst, thr: cmp's order
 * without the call (an equal value loses on its index; NaN is the largest value). */
static inline bool topk_enters(const topk_job *j, const kv_t *thr, const char *v)
{
    if (j->is_int) {
        int64_t a;
        memcpy(&a, v, 8);
        return j->largest ? a > thr->v.i : a < thr->v.i;
    }
    double a;
    memcpy(&a, v, 8);
    bool an = a != a, tn = thr->v.d != thr->v.d;
    return j->largest ? !tn && (an || a > thr->v.d) : tn ? !an : a < thr->v.d;
}

/* A line's K first under cmp into tmp[0..K), in order. cmp is a total order (equal values by index), so
 * these are the first K of the whole line sorted. For K well under D, a heap of the K best so far, each
 * later value checked against its worst inline (D compares, log K more for the few that enter): TopK 10 of
 * 256 lines of 1024 took 27 ms by a qsort of every line (ONNX Runtime 0.44). */
static void topk_line(const topk_job *j, kv_t *tmp, const char *src)
{
    int64_t D = j->D, K = j->K, st = j->inner * 8;
    if (K == 0) return;
    bool heap = K * 8 <= D;
    for (int64_t t = 0; t < (heap ? K : D); t++) {
        memcpy(&tmp[t].v, src + t * st, 8);
        tmp[t].idx = t;
    }
    if (!heap) {
        qsort(tmp, (size_t)D, sizeof(kv_t), j->cmp);
        return;
    }
    for (int64_t p = K / 2 - 1; p >= 0; p--) topk_sift(tmp, K, p, j->cmp);
    for (int64_t t = K; t < D; t++)
        if (topk_enters(j, &tmp[0], src + t * st)) {
            memcpy(&tmp[0].v, src + t * st, 8);
            tmp[0].idx = t;
            topk_sift(tmp, K, 0, j->cmp);
        }
    qsort(tmp, (size_t)K, sizeof(kv_t), j->cmp);
}

#define TOPK_BLOCK 16
typedef float tk_v4 __attribute__((vector_size(16))); /* SSE2's width: every x86-64 has it */
typedef int32_t tk_v4i __attribute__((vector_size(16)));

/* topk_sift with tk_before: h[p] moved down below every child that goes after it */
static inline __attribute__((always_inline)) void tk_sift(kv_t *h, int64_t n, int64_t p, bool largest)
{
    for (;;) {
        int64_t c = 2 * p + 1;
        if (c >= n) return;
        if (c + 1 < n && tk_before(&h[c], &h[c + 1], largest)) c++;
        if (tk_before(&h[c], &h[p], largest)) return;
        kv_t t = h[p];
        h[p] = h[c];
        h[c] = t;
        p = c;
    }
}

/* topk_line for a contiguous f32 line with K * 8 <= D, read in place with the heap's order inline and
 * its worst value kept as a float (exact: every heap value came from x). Through topk_line (the line
 * widened to f64, each value checked through the generic test, the heap through cmp's pointer) TopK 10
 * of 256 lines of 1024 took 0.92 ms on 2 Zen 5 threads, this 0.21 (0.62-0.66 in runs where the second
 * thread took no share; ONNX Runtime 0.15-0.23). Most of what is left is the heap's inserts (~50 a line)
 * and the first ~160 values of a line, where most blocks hold a value that enters. */
static inline __attribute__((always_inline)) void tk_scan_f32(kv_t *tmp, const float *x, int64_t D, int64_t K,
                                                             bool largest)
{
    for (int64_t t = 0; t < K; t++) {
        tmp[t].v.d = x[t];
        tmp[t].idx = t;
    }
    for (int64_t p = K / 2 - 1; p >= 0; p--) tk_sift(tmp, K, p, largest);
    float thr = (float)tmp[0].v.d;
    for (int64_t t = K; t < D;) {
        /* the largest first with K NaNs held: nothing later enters (NaN ties go by index) */
        if (largest && thr != thr) return;
        /* a block of TOPK_BLOCK with nothing that enters, checked without branches (vectorises) */
        if (t + TOPK_BLOCK <= D && (largest || thr == thr)) {
            tk_v4i any = {0};
            for (int q = 0; q < TOPK_BLOCK; q += 4) {
                tk_v4 v;
                memcpy(&v, x + t + q, sizeof v);
                any |= largest ? ~(v <= thr) : v < thr;
            }
            if (!((any[0] | any[1]) | (any[2] | any[3]))) {
                t += TOPK_BLOCK;
                continue;
            }
        }
        for (int64_t e = D - t < TOPK_BLOCK ? D : t + TOPK_BLOCK; t < e; t++) {
            float v = x[t];
            /* topk_enters: above the worst, or NaN (largest; thr is not NaN here); below it, or any number
             * over a NaN worst (smallest); a later index loses a tie */
            bool in = largest ? !(v <= thr) : (thr != thr ? v == v : v < thr);
            if (in) {
                tmp[0].v.d = v;
                tmp[0].idx = t;
                tk_sift(tmp, K, 0, largest);
                thr = (float)tmp[0].v.d;
                if (largest && thr != thr) return;
            }
        }
    }
}

static void topk_line_f32(const topk_job *j, kv_t *tmp, const float *x)
{
    if (j->largest) tk_scan_f32(tmp, x, j->D, j->K, true);
    else tk_scan_f32(tmp, x, j->D, j->K, false);
    qsort(tmp, (size_t)j->K, sizeof(kv_t), j->cmp);
}

static void topk_range(void *arg, int64_t b, int64_t e)
{
    topk_job *j = arg;
    kv_t *tmp = wf__malloc(sizeof(kv_t) * (size_t)j->D);
    if (!tmp) {
        atomic_store(&j->oom, true);
        return;
    }
    for (int64_t line = b; line < e; line++) {
        int64_t o = line / j->inner, i = line % j->inner;
        if (j->xf32) topk_line_f32(j, tmp, j->xf32 + line * j->D);
        else topk_line(j, tmp, (const char *)j->x + (size_t)(o * j->D * j->inner + i) * 8);
        for (int64_t t = 0; t < j->K; t++) {
            int64_t p = (o * j->K + t) * j->inner + i;
            memcpy((char *)j->vals + (size_t)p * 8, &tmp[t].v, 8);
            j->idx[p] = tmp[t].idx;
        }
    }
    wf__free(tmp);
}

wf_status *wf__k_topk(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis"), K;
    int a;
    if (!wf__norm_axis(axis, x->rank, &a))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                             wf__shape_str(x->rank, x->dims, b));
    WF__TRY(wf__km_scalar_int(k, 1, "K", &K));
    if (K < 0 || K > x->dims[a])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "K = %" PRId64 " is out of range for axis %d of input %s", K, a,
                             wf__shape_str(x->rank, x->dims, b));
    bool largest = wf__attr_i(k->op, k->attrs, "largest") != 0;
    topk_job j = {.is_int = !wf__dtype_is_float(x->dtype), .largest = largest, .D = x->dims[a], .K = K,
                  .inner = wf__numel(x->rank - a - 1, x->dims + a + 1)};
    j.cmp = j.is_int ? (largest ? cmp_i_large : cmp_i_small) : (largest ? cmp_f_large : cmp_f_small);
    atomic_init(&j.oom, false);
    int64_t yd[WF_MAX_RANK];
    memcpy(yd, x->dims, sizeof(int64_t) * (size_t)x->rank);
    yd[a] = K;
    int64_t ny = wf__numel(x->rank, yd);
    wf_tensor *yi;
    void *xb = NULL;
    wf_status *s = NULL;
    if (x->dtype == WF_F32 && j.inner == 1 && K * 8 <= j.D) j.xf32 = x->data;
    else s = wf__km_widen(k, x, j.is_int, &xb);
    j.x = xb;
    if (!s) s = wf__km_alloc8(k, ny, "TopK values", &j.vals);
    if (!s) s = wf__kctx_output(k, 1, WF_I64, x->rank, yd, &yi);
    if (!s) {
        j.idx = yi->data;
        int64_t lines = wf__numel(a, x->dims) * j.inner;
        if (ny) {
            int64_t grain = WF__KM_GRAIN / (j.D ? j.D : 1);
            wf__parallel_for(k, lines, grain > 0 ? grain : 1, topk_range, &j);
        }
        if (atomic_load(&j.oom)) s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory sorting %" PRId64 " values", j.D);
    }
    if (!s) s = emit(k, j.vals, j.is_int, x->dtype, x->rank, yd);
    wf__free(xb);
    wf__free(j.vals);
    return s;
}
