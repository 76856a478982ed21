/*
 * CPU kernel for Resize (opset 19): nearest, linear and cubic on any rank, every coordinate transformation
 * mode, antialiased downsampling and exclude_outside. Resampling is separable, so it runs one axis at a
 * time: each resized axis gets a table of source taps and weights per output position, which
 * reproduces the ONNX reference's neighbour choice (edge padding, ties to the left pixel).
 */
#include "backends/cpu/k_isa.h"
#include "backends/cpu/k_misc.h"
#include "ops/kutil_resize.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SB WF__KM_SB

typedef struct {
    int n;            /* taps per output position */
    int64_t *idx;     /* [out][n] source positions, clamped */
    double *w;        /* [out][n] */
    uint8_t *ext;     /* [out]: use the extrapolation value (tf_crop_and_resize outside the roi) */
} taps;

typedef struct {
    const double *src;
    double *dst;
    const taps *T;
    int64_t in_len, out_len, inner;
    double extrap;
} pass_job;

static void pass_range(void *arg, int64_t b, int64_t e)
{
    const pass_job *j = arg;
    int n = j->T->n;
    for (int64_t q = b; q < e; q++) {
        int64_t o = q / j->out_len, p = q % j->out_len;
        double *d = j->dst + q * j->inner;
        if (j->T->ext[p]) {
            for (int64_t i = 0; i < j->inner; i++) d[i] = j->extrap;
            continue;
        }
        for (int64_t i = 0; i < j->inner; i++) d[i] = 0;
        for (int t = 0; t < n; t++) {
            double w = j->T->w[p * n + t];
            if (w == 0) continue;
            const double *s = j->src + (o * j->in_len + j->T->idx[p * n + t]) * j->inner;
            for (int64_t i = 0; i < j->inner; i++) d[i] += w * s[i];
        }
    }
}

/* The common case of input pipelines and image models: f32, two taps (linear without antialiasing)
 * on exactly two adjacent axes d, d + 1 ([H, W, C] images, NHWC or NCHW batches), nothing cropped.
 * Per output row, the two source rows are blended into a row buffer (contiguous, vectorised), then
 * the output columns gather from it with their two taps; in f32 with weights from the same tables as
 * the general path (which computes in f64), so results differ from it by f32 rounding only. */
typedef void (*rs2_columns_fn)(float *restrict, const float *, const int32_t *, const int32_t *, const float *,
                               const float *, int64_t);

typedef struct rs2 {
    const float *x;
    const uint8_t *xu8; /* the image in u8 instead (a Cast fused into the Resize by lowering): converted
                           while the rows blend, the same values the Cast would have given */
    float *y;
    const int64_t *hi;     /* [out][2] source rows */
    const float *hw;       /* [out][2] their weights */
    const int32_t *ci;     /* [2][wout * inner]: each output value of a row, its two sources in the row */
    const float *cw;       /* [2][wout * inner] and their weights */
    rs2_columns_fn columns;
    int64_t hin, win, hout, wout, inner;
    atomic_int failed; /* a range could not get its row buffer */
} rs2;

/* One row blend; the u8 form converts in the same expression. Neither contracts a * s0 + b * s1 into an
 * FMA (the compiler would decide by context, and the AVX2 build has none): a fused Cast gives the unfused
 * graph's bits (test_passes test_cast_resize_prologue), and every ISA gives the same. */
#if defined(__GNUC__) && !defined(__clang__)
#define RS2_EXACT __attribute__((noinline, optimize("fp-contract=off")))
#else
#define RS2_EXACT __attribute__((noinline)) /* clang contracts only within one expression, alike in both */
#endif

WF__VEC RS2_EXACT static void rs2_blend(float *restrict tmp, const float *s0, const float *s1, float a, float b,
                                        int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) tmp[i] = a * s0[i] + b * s1[i];
}

WF__VEC RS2_EXACT static void rs2_blend_u8(float *restrict tmp, const uint8_t *s0, const uint8_t *s1, float a,
                                           float b, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) tmp[i] = a * (float)s0[i] + b * (float)s1[i];
}

/* The columns of one row: every output value gathers its two taps from the blended row (i0/i1, weights
 * w0/w1: per value, so channels need no inner loop). The compiler does not vectorise the gathers on
 * every CPU (GCC's tuning turns them off where microcode made them slow), so the AVX-512 and AVX2 forms
 * say them; each value takes the same arithmetic in every form. */
static void rs2_columns_any(float *restrict d, const float *tmp, const int32_t *i0, const int32_t *i1,
                            const float *w0, const float *w1, int64_t j, int64_t n)
{
    for (; j < n; j++) d[j] = w0[j] * tmp[i0[j]] + w1[j] * tmp[i1[j]];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx512f"), noinline)) static void rs2_columns_avx512(float *restrict d, const float *tmp,
                                                                           const int32_t *i0, const int32_t *i1,
                                                                           const float *w0, const float *w1, int64_t n)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 x0 = _mm512_i32gather_ps(_mm512_loadu_si512(i0 + j), tmp, 4);
        __m512 x1 = _mm512_i32gather_ps(_mm512_loadu_si512(i1 + j), tmp, 4);
        _mm512_storeu_ps(d + j, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(w0 + j), x0),
                                              _mm512_mul_ps(_mm512_loadu_ps(w1 + j), x1)));
    }
    rs2_columns_any(d, tmp, i0, i1, w0, w1, j, n);
}

__attribute__((target("avx2"), noinline)) static void rs2_columns_avx2(float *restrict d, const float *tmp,
                                                                      const int32_t *i0, const int32_t *i1,
                                                                      const float *w0, const float *w1, int64_t n)
{
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x0 = _mm256_i32gather_ps(tmp, _mm256_loadu_si256((const __m256i *)(i0 + j)), 4);
        __m256 x1 = _mm256_i32gather_ps(tmp, _mm256_loadu_si256((const __m256i *)(i1 + j)), 4);
        _mm256_storeu_ps(d + j, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(w0 + j), x0),
                                              _mm256_mul_ps(_mm256_loadu_ps(w1 + j), x1)));
    }
    rs2_columns_any(d, tmp, i0, i1, w0, w1, j, n);
}
#endif

static void rs2_columns_plain(float *restrict d, const float *tmp, const int32_t *i0, const int32_t *i1,
                              const float *w0, const float *w1, int64_t n)
{
    rs2_columns_any(d, tmp, i0, i1, w0, w1, 0, n);
}

/* The best form this CPU runs, chosen once; WEFT_CPU_RESIZE=avx2 or plain picks a lesser one, so that
 * the test suite runs every form on an AVX-512 machine (scripts/run-tests.sh). */
static rs2_columns_fn rs2_columns(void)
{
    static const rs2_columns_fn forms[3] = {
        rs2_columns_plain,
#if defined(__x86_64__) && defined(__GNUC__)
        rs2_columns_avx2, rs2_columns_avx512,
#else
        rs2_columns_plain, rs2_columns_plain,
#endif
    };
    static atomic_int pick = -1;
    int f = wf__cpu_form(&pick, "WEFT_CPU_RESIZE", "plain");
    return forms[f];
}

WF__VEC static void rs2_range(void *arg, int64_t b, int64_t e)
{
    const rs2 *r = arg;
    int64_t rowin = r->win * r->inner, rowout = r->wout * r->inner;
    float *tmp = wf__malloc(sizeof(float) * (size_t)(rowin ? rowin : 1));
    if (!tmp) {
        atomic_store((atomic_int *)&r->failed, 1);
        return;
    }
    for (int64_t q = b; q < e; q++) {
        int64_t o = q / r->hout, yo = q % r->hout;
        int64_t o0 = (o * r->hin + r->hi[2 * yo]) * rowin, o1 = (o * r->hin + r->hi[2 * yo + 1]) * rowin;
        float a = r->hw[2 * yo], bw = r->hw[2 * yo + 1];
        if (r->xu8) rs2_blend_u8(tmp, r->xu8 + o0, r->xu8 + o1, a, bw, rowin);
        else rs2_blend(tmp, r->x + o0, r->x + o1, a, bw, rowin);
        r->columns(r->y + q * rowout, tmp, r->ci, r->ci + rowout, r->cw, r->cw + rowout, rowout);
    }
    wf__free(tmp);
}

/* Runs the fast path when it applies (true), leaving *s for its errors; false: use the general one. */
static bool resize2d_f32(wf__kctx *k, const wf__ku_rs_params *P, const wf_tensor *x, wf_tensor *y, const int64_t *yd,
                         const double *scale, bool crop, wf_status **s)
{
    bool u8 = x->dtype == WF_U8; /* a Cast fused in: y is f32 (checked next) */
    if ((x->dtype != WF_F32 && !u8) || y->dtype != WF_F32 || crop || strcmp(P->mode, "linear") || P->antialias)
        return false;
    int d = -1, n = 0;
    for (int a = 0; a < x->rank; a++) {
        bool identity = yd[a] == x->dims[a] && fabs(scale[a] - 1.0) < 1e-12;
        if (identity) continue;
        if (n == 0) d = a;
        n++;
    }
    if (n != 2 || d + 1 >= x->rank || (yd[d + 1] == x->dims[d + 1] && fabs(scale[d + 1] - 1.0) < 1e-12)) return false;
    if (wf__ku_rs_tap_count(P, scale[d]) != 2 || wf__ku_rs_tap_count(P, scale[d + 1]) != 2) return false;
    int64_t hout = yd[d], wout = yd[d + 1], inner = wf__numel(x->rank - d - 2, x->dims + d + 2);
    int64_t rowout = wout * inner;
    /* the per-value column taps index a row in int32 */
    if (x->dims[d + 1] * inner >= INT32_MAX || rowout >= INT32_MAX / 2) return false;
    int64_t *idx = wf__malloc(sizeof(int64_t) * (size_t)(2 * (hout + wout)));
    double *w = wf__malloc(sizeof(double) * (size_t)(2 * (hout + wout)));
    float *wf = wf__malloc(sizeof(float) * (size_t)(2 * (hout + wout)));
    uint8_t *ext = wf__malloc((size_t)(hout + wout));
    int32_t *ci = wf__malloc(sizeof(int32_t) * (size_t)(2 * rowout + 1));
    float *cw = wf__malloc(sizeof(float) * (size_t)(2 * rowout + 1));
    if (!idx || !w || !wf || !ext || !ci || !cw) {
        *s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the resize taps");
    } else {
        wf__ku_rs_axis_taps(P, 2, x->dims[d], hout, scale[d], 0, 1, idx, w, ext);
        wf__ku_rs_axis_taps(P, 2, x->dims[d + 1], wout, scale[d + 1], 0, 1, idx + 2 * hout, w + 2 * hout, ext + hout);
        for (int64_t i = 0; i < 2 * (hout + wout); i++) wf[i] = (float)w[i];
        const int64_t *wi = idx + 2 * hout;
        const float *ww = wf + 2 * hout;
        for (int64_t j = 0; j < rowout; j++) {
            int64_t xo = j / inner, c = j % inner;
            ci[j] = (int32_t)(wi[2 * xo] * inner + c);
            ci[rowout + j] = (int32_t)(wi[2 * xo + 1] * inner + c);
            cw[j] = ww[2 * xo];
            cw[rowout + j] = ww[2 * xo + 1];
        }
        rs2 r = {.x = u8 ? NULL : x->data, .xu8 = u8 ? x->data : NULL, .y = y->data, .hi = idx, .hw = wf,
                 .ci = ci, .cw = cw, .columns = rs2_columns(), .hin = x->dims[d], .win = x->dims[d + 1],
                 .hout = hout, .wout = wout, .inner = inner};
        int64_t outer = wf__numel(d, x->dims), work = (r.win + r.wout) * r.inner;
        int64_t grain = WF__KM_GRAIN / (work > 0 ? work : 1);
        wf__parallel_for(k, outer * hout, grain > 0 ? grain : 1, rs2_range, &r);
        if (atomic_load(&r.failed))
            *s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for a resize row of %lld floats",
                               (long long)(r.win * r.inner));
    }
    wf__free(idx);
    wf__free(w);
    wf__free(wf);
    wf__free(ext);
    wf__free(ci);
    wf__free(cw);
    return true;
}

/* ---- nearest: a gather ----------------------------------------------------------------------------------- */

/* mode nearest with every output position taking one source element (no extrapolated position, no tap
 * excluded): y is x gathered along each axis by its table of source positions, elements moved as bytes (any
 * dtype, NaN and every bit kept). Through the f64 passes 8 x 64 x 32 x 32 f32 upsampled x2 took 29 ms on 2
 * Zen 3 threads (ONNX Runtime 1.5). */
typedef struct {
    const char *x;
    char *y;
    int rank;
    size_t eb;
    const int64_t *yd, *xst; /* output dims; input strides in elements */
    int64_t *const *src;     /* [rank][yd[d]]: each output position's source position along axis d */
} rsn_job;

static void rsn_rows(void *arg, int64_t r0, int64_t r1)
{
    const rsn_job *j = arg;
    int last = j->rank - 1;
    int64_t n = j->yd[last];
    const int64_t *cols = j->src[last];
    for (int64_t row = r0; row < r1; row++) {
        int64_t off = 0, rem = row;
        for (int d = last - 1; d >= 0; d--) {
            off += j->src[d][rem % j->yd[d]] * j->xst[d];
            rem /= j->yd[d];
        }
        char *yr = j->y + (size_t)(row * n) * j->eb;
        switch (j->eb) {
        case 4: {
            const uint32_t *xr = (const uint32_t *)j->x + off;
            for (int64_t c = 0; c < n; c++) ((uint32_t *)yr)[c] = xr[cols[c]];
            break;
        }
        case 2: {
            const uint16_t *xr = (const uint16_t *)j->x + off;
            for (int64_t c = 0; c < n; c++) ((uint16_t *)yr)[c] = xr[cols[c]];
            break;
        }
        case 1:
            for (int64_t c = 0; c < n; c++) yr[c] = j->x[off + cols[c]];
            break;
        default:
            for (int64_t c = 0; c < n; c++) memcpy(yr + (size_t)c * j->eb, j->x + (size_t)(off + cols[c]) * j->eb, j->eb);
        }
    }
}

static bool resize_nearest(wf__kctx *k, const wf__ku_rs_params *P, const wf_tensor *x, wf_tensor *y, const int64_t *yd,
                           const double *scale, const double *r0, const double *r1, wf_status **s)
{
    if (strcmp(P->mode, "nearest") || y->dtype != x->dtype || x->dtype == WF_STRING || x->rank < 1) return false;
    int r = x->rank;
    int64_t total = 0;
    for (int d = 0; d < r; d++) total += yd[d];
    int64_t *tab = wf__malloc(sizeof(int64_t) * (size_t)(3 * total + 1));
    double *w = wf__malloc(sizeof(double) * (size_t)(2 * total + 1));
    uint8_t *ext = wf__malloc((size_t)total + 1);
    if (!tab || !w || !ext) {
        wf__free(tab);
        wf__free(w);
        wf__free(ext);
        *s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the resize taps");
        return true;
    }
    /* each axis: two taps a position from the shared rule (the chosen one weighs 1), then the chosen one */
    int64_t *src[WF_MAX_RANK], *idx2 = tab + total, at = 0;
    bool ok = true;
    for (int d = 0; d < r && ok; d++) {
        src[d] = tab + at;
        /* an axis the general path leaves alone (wf__k_resize's identity) */
        if (yd[d] == x->dims[d] && fabs(scale[d] - 1.0) < 1e-12 && r0[d] == 0 && r1[d] == 1) {
            for (int64_t o = 0; o < yd[d]; o++) src[d][o] = o;
            at += yd[d];
            continue;
        }
        wf__ku_rs_axis_taps(P, 2, x->dims[d], yd[d], scale[d], r0[d], r1[d], idx2 + 2 * at, w + 2 * at, ext + at);
        for (int64_t o = 0; o < yd[d] && ok; o++) {
            const double *wo = w + 2 * (at + o);
            ok = !ext[at + o] && ((wo[0] == 1 && wo[1] == 0) || (wo[0] == 0 && wo[1] == 1));
            src[d][o] = idx2[2 * (at + o) + (wo[0] == 1 ? 0 : 1)];
        }
        at += yd[d];
    }
    if (ok) {
        int64_t xst[WF_MAX_RANK];
        wf__strides(r, x->dims, xst);
        rsn_job j = {x->data, y->data, r, wf_dtype_size(x->dtype), yd, xst, src};
        int64_t rows = y->size / yd[r - 1], grain = WF__KM_GRAIN / (yd[r - 1] > 0 ? yd[r - 1] : 1);
        wf__parallel_for(k, rows, grain > 0 ? grain : 1, rsn_rows, &j);
    }
    wf__free(tab);
    wf__free(w);
    wf__free(ext);
    return ok;
}

static wf_status *read_floats(wf__kctx *k, int idx, const char *what, double *v, int max, int *n)
{
    const wf_tensor *t = k->in[idx];
    if (!wf__dtype_is_float(t->dtype) || t->rank != 1 || t->size > max)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s must be a 1-D float tensor with at most %d values", what, max);
    for (int64_t i = 0; i < t->size; i++) v[i] = wf__load_f64(t->data, t->dtype, i);
    *n = (int)t->size;
    return NULL;
}

wf_status *wf__k_resize(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB], err[256];
    wf__ku_rs_params P = {.mode = wf__attr_s(k->op, k->attrs, "mode"),
                             .ctm = wf__attr_s(k->op, k->attrs, "coordinate_transformation_mode"),
                             .nearest = wf__attr_s(k->op, k->attrs, "nearest_mode"),
                             .cubic_a = wf__attr_f(k->op, k->attrs, "cubic_coeff_a"),
                             .extrap = wf__attr_f(k->op, k->attrs, "extrapolation_value"),
                             .exclude = wf__attr_i(k->op, k->attrs, "exclude_outside") != 0};
    P.antialias = wf__attr_i(k->op, k->attrs, "antialias") != 0 && strcmp(P.mode, "nearest");
    const wf__attr *axa = wf__attr_get(k->op, k->attrs, "axes");
    int axes[WF_MAX_RANK], na = axa->n;
    for (int i = 0; i < na; i++)
        if (na > x->rank || !wf__norm_axis(axa->ints[i], x->rank, &axes[i]))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axes do not fit input %s", wf__shape_str(x->rank, x->dims, b));
    int want = na ? na : x->rank;
    double sc[WF_MAX_RANK], roi[2 * WF_MAX_RANK], scale[WF_MAX_RANK];
    int64_t sz[WF_MAX_RANK], yd[WF_MAX_RANK];
    int nsc = 0, nsz = 0, nroi = 0;
    if (wf__km_has(k, 2) && k->in[2]->size) WF__TRY(read_floats(k, 2, "scales", sc, WF_MAX_RANK, &nsc));
    if (wf__km_has(k, 3) && k->in[3]->size) {
        const wf_tensor *t = k->in[3];
        if (t->dtype != WF_I64 || t->rank != 1 || t->size > WF_MAX_RANK)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "sizes must be a 1-D i64 tensor");
        nsz = (int)t->size;
        for (int i = 0; i < nsz; i++) sz[i] = ((const int64_t *)t->data)[i];
    }
    if (!nsc == !nsz) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "give exactly one of scales (input 2) and sizes (input 3)");
    if (!wf__ku_resize_shape(x->rank, x->dims, axes, na, sc, nsc, sz, nsz,
                          wf__attr_s(k->op, k->attrs, "keep_aspect_ratio_policy"), yd, scale, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    bool crop = !strcmp(P.ctm, "tf_crop_and_resize");
    double r0[WF_MAX_RANK], r1[WF_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        r0[d] = 0;
        r1[d] = 1;
    }
    if (crop) {
        if (!wf__km_has(k, 1)) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "tf_crop_and_resize needs roi (input 1)");
        WF__TRY(read_floats(k, 1, "roi", roi, 2 * WF_MAX_RANK, &nroi));
        if (nroi != 2 * want)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "roi has %d values; expected %d for input %s", nroi, 2 * want,
                                 wf__shape_str(x->rank, x->dims, b));
        for (int i = 0; i < want; i++) {
            int d = na ? axes[i] : i;
            r0[d] = roi[i];
            r1[d] = roi[want + i];
        }
    }
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] == 0 && yd[d] > 0)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot resize the empty dim %d of input %s to %" PRId64, d,
                                 wf__shape_str(x->rank, x->dims, b), yd[d]);
    /* the planned dtype: the input's, or f32 where lowering fused a u8 -> f32 Cast into this Resize */
    wf_dtype ydt = k->out_info && wf__dtype_valid(k->out_info[0].dtype) ? k->out_info[0].dtype : x->dtype;
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, ydt, x->rank, yd, &y));
    if (!y->size) return NULL;
    wf_status *fs = NULL;
    if (resize2d_f32(k, &P, x, y, yd, scale, crop, &fs)) return fs;
    if (resize_nearest(k, &P, x, y, yd, scale, r0, r1, &fs)) return fs;
    double *cur = NULL, *next = NULL;
    wf_status *s = wf__km_widen(k, x, false, (void **)&cur);
    int64_t cd[WF_MAX_RANK];
    memcpy(cd, x->dims, sizeof(int64_t) * (size_t)x->rank);
    for (int d = 0; d < x->rank && !s; d++) {
        bool identity = yd[d] == x->dims[d] && fabs(scale[d] - 1.0) < 1e-12 && (!crop || (r0[d] == 0 && r1[d] == 1));
        if (identity) continue;
        taps T = {.n = wf__ku_rs_tap_count(&P, scale[d])};
        int64_t outer = wf__numel(d, cd), inner = wf__numel(x->rank - d - 1, cd + d + 1);
        T.idx = wf__malloc(sizeof(int64_t) * (size_t)(yd[d] * T.n + 1));
        T.w = wf__malloc(sizeof(double) * (size_t)(yd[d] * T.n + 1));
        T.ext = wf__malloc((size_t)yd[d] + 1);
        if (!T.idx || !T.w || !T.ext) s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the resize taps of axis %d", d);
        if (!s) s = wf__km_alloc8(k, outer * yd[d] * inner, "a resize pass", (void **)&next);
        if (!s) {
            wf__ku_rs_axis_taps(&P, T.n, x->dims[d], yd[d], scale[d], r0[d], r1[d], T.idx, T.w, T.ext);
            pass_job j = {.src = cur, .dst = next, .T = &T, .in_len = cd[d], .out_len = yd[d], .inner = inner,
                          .extrap = P.extrap};
            int64_t work = inner * T.n, grain = WF__KM_GRAIN / (work > 0 ? work : 1);
            wf__parallel_for(k, outer * yd[d], grain > 0 ? grain : 1, pass_range, &j);
            wf__free(cur);
            cur = next;
            next = NULL;
            cd[d] = yd[d];
        }
        wf__free(T.idx);
        wf__free(T.w);
        wf__free(T.ext);
    }
    if (!s) wf__convert(cur, WF_F64, y->data, y->dtype, y->size);
    wf__free(cur);
    return s;
}
