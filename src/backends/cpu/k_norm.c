/*
 * CPU kernels for Softmax, LogSoftmax, BatchNormalization (inference), LayerNormalization and
 * inference Dropout; listed in k_reduce.c's table. f16/bf16 tensors are widened to f32 once, computed
 * in place and narrowed back, so each loop exists for f32 and f64 only.
 */
#include "device/kernel.h"
#include "ops/kutil_reduce.h"

#include <math.h>

/* weft never reads floating-point exception flags; without this GCC refuses to if-convert the clamps
 * and selects in exp_f32, and the softmax loops stay scalar. */
#pragma GCC optimize("no-trapping-math")


wf_status *wf__k_softmax(wf__kctx *k);
wf_status *wf__k_log_softmax(wf__kctx *k);
wf_status *wf__k_batchnorm(wf__kctx *k);
wf_status *wf__k_layernorm(wf__kctx *k);
wf_status *wf__k_dropout(wf__kctx *k);

#define LANES 32
#define TW 256
#define GRAIN 32768

/* Runs BODY for i in [0, n) in fixed blocks of 16, which the vectoriser takes even at -O2. */
#define FOR_VEC(i, n, BODY)                                                                             \
    do {                                                                                                \
        int64_t i##0_ = 0;                                                                              \
        for (; i##0_ + 16 <= (n); i##0_ += 16)                                                          \
            _Pragma("GCC ivdep") for (int i##j_ = 0; i##j_ < 16; i##j_++) {                             \
                int64_t i = i##0_ + i##j_;                                                              \
                BODY;                                                                                   \
            }                                                                                           \
        for (int64_t i = i##0_; i < (n); i++) BODY;                                                     \
    } while (0)

/* expf for the vectoriser (libm's is a call): Cody-Waite reduction and a degree-6 polynomial, within
 * ~2 ulp. Below -87 the result is 0 so masked (-inf) logits get exactly zero weight. */
static inline float exp_f32(float x)
{
    /* written so that NaN also lands in range: (int32_t)NaN below would be undefined */
    float xc = x > -87.0f ? x : -87.0f;
    xc = xc < 88.0f ? xc : 88.0f;
    float t = xc * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float s;
    memcpy(&s, &bits, sizeof s);
    return x < -87.0f ? 0.0f : x != x ? x : p * s;
}

/* ---- widening f16/bf16 -------------------------------------------------------------------------- */

static bool is_f64(wf_dtype dt) { return dt == WF_F64; }

/* Returns x's data as f32 or f64; f16/bf16 are converted into a new buffer (*owned). */
static wf_status *widen(wf__kctx *k, const wf_tensor *x, void **data, void **owned)
{
    *owned = NULL;
    *data = x->data;
    if (x->dtype == WF_F32 || x->dtype == WF_F64 || x->size == 0) return NULL;
    size_t bytes = (size_t)x->size * 4;
    void *buf = wf__malloc(bytes);
    if (!buf) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for an f32 copy", bytes);
    wf__convert(x->data, x->dtype, buf, WF_F32, x->size);
    *owned = buf;
    *data = buf;
    return NULL;
}

/* ---- Softmax -------------------------------------------------------------------------------------- */

typedef struct splan {
    bool is_log, f64;
    const void *x;
    void *y;
    int64_t R, inner, ntiles;
} splan;

WF__VEC static void softmax_row_f32(const float *x, float *y, int64_t n, bool is_log)
{
    float acc[LANES];
    for (int j = 0; j < LANES; j++) acc[j] = -INFINITY;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] = (x[i + j] > acc[j] || x[i + j] != x[i + j]) ? x[i + j] : acc[j];
    float m = -INFINITY;
    for (; i < n; i++) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
    for (int j = 0; j < LANES; j++) m = (acc[j] > m || acc[j] != acc[j]) ? acc[j] : m;

    double sum = 0;
    for (int64_t b = 0; b < n; b += 4096) {
        int64_t e = n - b > 4096 ? b + 4096 : n;
        float s[LANES] = {0};
        if (is_log) {
            for (i = b; i + LANES <= e; i += LANES)
                for (int j = 0; j < LANES; j++) s[j] += exp_f32(x[i + j] - m);
        } else {
            for (i = b; i + LANES <= e; i += LANES)
#pragma GCC ivdep
                for (int j = 0; j < LANES; j++) {
                    float v = exp_f32(x[i + j] - m);
                    y[i + j] = v;
                    s[j] += v;
                }
        }
        for (; i < e; i++) {
            float v = exp_f32(x[i] - m);
            if (!is_log) y[i] = v;
            sum += v;
        }
        for (int j = 0; j < LANES; j++) sum += s[j];
    }
    if (is_log) {
        /* (x - m) - log(sum), not x - (m + log(sum)): with large logits the sum would round away. */
        float ls = (float)log(sum);
        FOR_VEC(j, n, y[j] = (x[j] - m) - ls);
    } else {
        float inv = (float)(1.0 / sum);
        FOR_VEC(j, n, y[j] *= inv);
    }
}

/* Softmax over rows `inner` elements apart, for a tile of tw adjacent columns. */
WF__VEC static void softmax_tile_f32(const float *x, float *y, int64_t R, int64_t inner, int64_t tw, bool is_log)
{
    float m[TW], s[TW];
    for (int64_t i = 0; i < tw; i++) {
        m[i] = -INFINITY;
        s[i] = 0;
    }
    for (int64_t r = 0; r < R; r++) {
        const float *q = x + r * inner;
        FOR_VEC(i, tw, m[i] = (q[i] > m[i] || q[i] != q[i]) ? q[i] : m[i]);
    }
    for (int64_t r = 0; r < R; r++) {
        const float *q = x + r * inner;
        float *o = y + r * inner;
        if (is_log) FOR_VEC(i, tw, s[i] += exp_f32(q[i] - m[i]));
        else FOR_VEC(i, tw, { float v = exp_f32(q[i] - m[i]); o[i] = v; s[i] += v; });
    }
    if (is_log) {
        for (int64_t i = 0; i < tw; i++) s[i] = logf(s[i]);
        for (int64_t r = 0; r < R; r++) {
            const float *q = x + r * inner;
            float *o = y + r * inner;
            FOR_VEC(i, tw, o[i] = (q[i] - m[i]) - s[i]);
        }
    } else {
        for (int64_t i = 0; i < tw; i++) s[i] = 1.0f / s[i];
        for (int64_t r = 0; r < R; r++) {
            float *o = y + r * inner;
            FOR_VEC(i, tw, o[i] *= s[i]);
        }
    }
}

/* f64 is rare enough for plain libm loops: one column (stride apart) at a time. */
static void softmax_col_f64(const double *x, double *y, int64_t R, int64_t stride, bool is_log)
{
    double m = -INFINITY, s = 0;
    for (int64_t r = 0; r < R; r++) {
        double v = x[r * stride];
        m = (v > m || v != v) ? v : m;
    }
    for (int64_t r = 0; r < R; r++) s += exp(x[r * stride] - m);
    if (is_log) {
        double ls = log(s);
        for (int64_t r = 0; r < R; r++) y[r * stride] = (x[r * stride] - m) - ls;
    } else {
        for (int64_t r = 0; r < R; r++) y[r * stride] = exp(x[r * stride] - m) / s;
    }
}

static void softmax_range(void *arg, int64_t b, int64_t e)
{
    const splan *S = arg;
    for (int64_t u = b; u < e; u++) {
        if (S->f64) {
            int64_t o = u / S->inner, i = u % S->inner;
            int64_t off = o * S->R * S->inner + i;
            softmax_col_f64((const double *)S->x + off, (double *)S->y + off, S->R, S->inner, S->is_log);
        } else if (S->inner == 1) {
            softmax_row_f32((const float *)S->x + u * S->R, (float *)S->y + u * S->R, S->R, S->is_log);
        } else {
            int64_t o = u / S->ntiles, i0 = (u % S->ntiles) * TW;
            int64_t tw = S->inner - i0 < TW ? S->inner - i0 : TW;
            int64_t off = o * S->R * S->inner + i0;
            softmax_tile_f32((const float *)S->x + off, (float *)S->y + off, S->R, S->inner, tw, S->is_log);
        }
    }
}

static wf_status *softmax_kernel(wf__kctx *k, bool is_log)
{
    wf_tensor *x = k->in[0];
    char b0[160];
    int a = 0;
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    if (x->rank > 0 && !wf__norm_axis(axis, x->rank, &a))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s%s", (long long)axis,
                             wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0));
    splan S = {.is_log = is_log, .f64 = is_f64(x->dtype), .R = 1, .inner = 1};
    int64_t outer = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < a) outer *= x->dims[i];
        else if (i == a) S.R = x->dims[i];
        else S.inner *= x->dims[i];
    }
    wf_tensor *y;
    bool reused;
    /* Each element is read before it is written, so the input's buffer can hold the result. */
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, &reused));
    if (x->size == 0) return NULL;
    void *xd, *owned;
    WF__TRY(widen(k, x, &xd, &owned));
    S.x = xd;
    S.y = owned ? owned : y->data;
    S.ntiles = (S.inner + TW - 1) / TW;
    int64_t units = S.f64 ? outer * S.inner : S.inner == 1 ? outer : outer * S.ntiles;
    int64_t per = S.R * (S.f64 ? 1 : S.inner < TW ? S.inner : TW);
    wf__parallel_for(k, units, per >= GRAIN / 4 ? 1 : GRAIN / 4 / per, softmax_range, &S);
    if (owned) {
        wf__convert(owned, WF_F32, y->data, y->dtype, y->size);
        wf__free(owned);
    }
    return NULL;
}

wf_status *wf__k_softmax(wf__kctx *k) { return softmax_kernel(k, false); }
wf_status *wf__k_log_softmax(wf__kctx *k) { return softmax_kernel(k, true); }

/* ---- BatchNormalization --------------------------------------------------------------------------- */

typedef struct bplan {
    bool f64;
    void *x;          /* computed in place in the widened buffer, or read from here into y */
    void *y;
    const double *a, *b; /* y = x * a[c] + b[c] */
    const float *af, *bf;
    int64_t C, S;
} bplan;

WF__VEC static void affine_f32(const float *x, float *y, int64_t n, float a, float b)
{
    FOR_VEC(i, n, y[i] = x[i] * a + b);
}

WF__VEC static void affine_vec_f32(const float *x, float *y, int64_t n, const float *a, const float *b)
{
    FOR_VEC(i, n, y[i] = x[i] * a[i] + b[i]);
}

static void bn_range(void *arg, int64_t b, int64_t e)
{
    const bplan *B = arg;
    for (int64_t u = b; u < e; u++) {
        if (B->S == 1) { /* rank 2: one row of C channels */
            if (B->f64) {
                const double *x = (const double *)B->x + u * B->C;
                double *y = (double *)B->y + u * B->C;
                for (int64_t c = 0; c < B->C; c++) y[c] = x[c] * B->a[c] + B->b[c];
            } else {
                affine_vec_f32((const float *)B->x + u * B->C, (float *)B->y + u * B->C, B->C, B->af, B->bf);
            }
            continue;
        }
        int64_t c = u % B->C;
        if (B->f64) {
            const double *x = (const double *)B->x + u * B->S;
            double *y = (double *)B->y + u * B->S;
            for (int64_t i = 0; i < B->S; i++) y[i] = x[i] * B->a[c] + B->b[c];
        } else {
            affine_f32((const float *)B->x + u * B->S, (float *)B->y + u * B->S, B->S, B->af[c], B->bf[c]);
        }
    }
}

wf_status *wf__k_batchnorm(wf__kctx *k)
{
    wf_tensor *x = k->in[0];
    char b0[160], b1[160];
    static const char *const pname[5] = {"X", "scale", "B", "input_mean", "input_var"};
    if (x->rank < 2)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input X %s must have rank >= 2 (N, C, ...)",
                             wf__shape_str(x->rank, x->dims, b0));
    int64_t C = x->dims[1];
    for (int i = 1; i < 5; i++) {
        const wf_tensor *p = k->in[i];
        if (p->dtype != x->dtype || p->rank != 1 || p->dims[0] != C)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s must be 1-D of length %lld with X's dtype %s",
                                 pname[i], wf_dtype_name(p->dtype), wf__shape_str(p->rank, p->dims, b1),
                                 (long long)C, wf_dtype_name(x->dtype));
    }
    wf_tensor *y;
    bool reused;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, &reused));
    if (x->size == 0) return NULL;
    double eps = wf__attr_f(k->op, k->attrs, "epsilon");
    size_t pb = (size_t)(C > 0 ? C : 1) * (2 * sizeof(double) + 2 * sizeof(float));
    char *par = wf__malloc(pb);
    if (!par) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes", pb);
    double *a = (double *)par, *bb = a + C;
    float *af = (float *)(bb + C), *bf = af + C;
    for (int64_t c = 0; c < C; c++) {
        double sc = wf__load_f64(k->in[1]->data, x->dtype, c), bias = wf__load_f64(k->in[2]->data, x->dtype, c);
        double mean = wf__load_f64(k->in[3]->data, x->dtype, c), var = wf__load_f64(k->in[4]->data, x->dtype, c);
        a[c] = sc / sqrt(var + eps);
        bb[c] = bias - mean * a[c];
        af[c] = (float)a[c];
        bf[c] = (float)bb[c];
    }
    void *xd, *owned;
    wf_status *st = widen(k, x, &xd, &owned);
    if (st) {
        wf__free(par);
        return st;
    }
    bplan B = {.f64 = is_f64(x->dtype), .x = xd, .y = owned ? owned : y->data, .a = a, .b = bb,
               .af = af, .bf = bf, .C = C, .S = x->size / (x->dims[0] * C)};
    int64_t units = B.S == 1 ? x->dims[0] : x->dims[0] * C;
    int64_t per = B.S == 1 ? C : B.S;
    wf__parallel_for(k, units, per >= GRAIN ? 1 : GRAIN / per, bn_range, &B);
    if (owned) {
        wf__convert(owned, WF_F32, y->data, y->dtype, y->size);
        wf__free(owned);
    }
    wf__free(par);
    return NULL;
}

/* ---- LayerNormalization --------------------------------------------------------------------------- */

typedef struct lplan {
    bool f64;
    const void *x;
    void *y;
    const void *scale, *bias; /* D values each (bias may be NULL), f32 or f64 */
    float *mean, *inv;        /* optional outputs */
    int64_t D;
    double eps;
} lplan;

WF__VEC static void ln_row_f32(const float *x, float *y, int64_t D, const float *s, const float *b, double eps,
                               float *mean_out, float *inv_out)
{
    double sum = 0, sq = 0;
    for (int64_t c = 0; c < D; c += 4096) {
        int64_t e = D - c > 4096 ? c + 4096 : D;
        float acc[LANES] = {0};
        int64_t i = c;
        for (; i + LANES <= e; i += LANES)
            for (int j = 0; j < LANES; j++) acc[j] += x[i + j];
        for (; i < e; i++) sum += x[i];
        for (int j = 0; j < LANES; j++) sum += acc[j];
    }
    double mean = sum / (double)D;
    float mf = (float)mean;
    /* Two passes: the variance of centred values does not cancel catastrophically. */
    for (int64_t c = 0; c < D; c += 4096) {
        int64_t e = D - c > 4096 ? c + 4096 : D;
        float acc[LANES] = {0};
        int64_t i = c;
        for (; i + LANES <= e; i += LANES)
            for (int j = 0; j < LANES; j++) {
                float d = x[i + j] - mf;
                acc[j] += d * d;
            }
        for (; i < e; i++) sq += (double)(x[i] - mf) * (x[i] - mf);
        for (int j = 0; j < LANES; j++) sq += acc[j];
    }
    float inv = (float)(1.0 / sqrt(sq / (double)D + eps));
    if (b) FOR_VEC(i, D, y[i] = (x[i] - mf) * inv * s[i] + b[i]);
    else FOR_VEC(i, D, y[i] = (x[i] - mf) * inv * s[i]);
    if (mean_out) *mean_out = mf;
    if (inv_out) *inv_out = inv;
}

static void ln_row_f64(const double *x, double *y, int64_t D, const double *s, const double *b, double eps,
                       float *mean_out, float *inv_out)
{
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < D; i++) sum += x[i];
    double mean = sum / (double)D;
    for (int64_t i = 0; i < D; i++) sq += (x[i] - mean) * (x[i] - mean);
    double inv = 1.0 / sqrt(sq / (double)D + eps);
    for (int64_t i = 0; i < D; i++) y[i] = (x[i] - mean) * inv * s[i] + (b ? b[i] : 0.0);
    if (mean_out) *mean_out = (float)mean;
    if (inv_out) *inv_out = (float)inv;
}

static void ln_range(void *arg, int64_t b, int64_t e)
{
    const lplan *L = arg;
    for (int64_t u = b; u < e; u++) {
        float *m = L->mean ? L->mean + u : NULL, *v = L->inv ? L->inv + u : NULL;
        if (L->f64)
            ln_row_f64((const double *)L->x + u * L->D, (double *)L->y + u * L->D, L->D, L->scale, L->bias,
                       L->eps, m, v);
        else
            ln_row_f32((const float *)L->x + u * L->D, (float *)L->y + u * L->D, L->D, L->scale, L->bias,
                       L->eps, m, v);
    }
}

/* Expands a parameter that broadcasts to the normalised dims nd[0..nr) into D values (f32 or f64). */
static void expand_param(const wf_tensor *p, int nr, const int64_t *nd, int64_t D, bool f64, void *out)
{
    int64_t pstr[WF_MAX_RANK];
    wf__strides(p->rank, p->dims, pstr);
    for (int64_t d = 0; d < D; d++) {
        int64_t rem = d, off = 0;
        for (int i = nr - 1; i >= 0; i--) {
            int64_t idx = rem % nd[i];
            rem /= nd[i];
            int pi = i - (nr - p->rank);
            if (pi >= 0 && p->dims[pi] != 1) off += idx * pstr[pi];
        }
        double v = wf__load_f64(p->data, p->dtype, off);
        if (f64) ((double *)out)[d] = v;
        else ((float *)out)[d] = (float)v;
    }
}

wf_status *wf__k_layernorm(wf__kctx *k)
{
    wf_tensor *x = k->in[0];
    const wf_tensor *sc = k->in[1], *bi = k->n_in > 2 ? k->in[2] : NULL;
    char b0[160], b1[160];
    int a;
    int64_t axis = wf__attr_i(k->op, k->attrs, "axis");
    if (!wf__norm_axis(axis, x->rank, &a))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s%s", (long long)axis,
                             wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0));
    for (int i = 0; i < 2; i++) {
        const wf_tensor *p = i ? bi : sc;
        if (p && (p->dtype != x->dtype || !wf__ku_ln_param_fits(p, x, a)))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s does not match X %s%s from axis %d",
                                 i ? "B" : "Scale", wf_dtype_name(p->dtype), wf__shape_str(p->rank, p->dims, b1),
                                 wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0), a);
    }
    int64_t rows, D, mdims[WF_MAX_RANK];
    wf__ku_ln_split(x->rank, x->dims, a, &rows, &D, mdims);
    wf_tensor *y, *mt = NULL, *it = NULL;
    bool reused;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, &reused));
    if (k->n_out > 1) WF__TRY(wf__kctx_output(k, 1, WF_F32, x->rank, mdims, &mt));
    if (k->n_out > 2) WF__TRY(wf__kctx_output(k, 2, WF_F32, x->rank, mdims, &it));
    if (rows == 0) return NULL;
    if (D == 0) { /* nothing to normalise: statistics of an empty set */
        for (int64_t r = 0; r < rows; r++) {
            if (mt) ((float *)mt->data)[r] = NAN;
            if (it) ((float *)it->data)[r] = NAN;
        }
        return NULL;
    }
    bool f64 = is_f64(x->dtype);
    size_t es = f64 ? 8 : 4;
    size_t pb = (size_t)D * es * (bi ? 2 : 1);
    char *par = wf__malloc(pb);
    if (!par) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes", pb);
    expand_param(sc, x->rank - a, x->dims + a, D, f64, par);
    if (bi) expand_param(bi, x->rank - a, x->dims + a, D, f64, par + (size_t)D * es);
    void *xd, *owned;
    wf_status *st = widen(k, x, &xd, &owned);
    if (st) {
        wf__free(par);
        return st;
    }
    lplan L = {.f64 = f64, .x = xd, .y = owned ? owned : y->data, .scale = par,
               .bias = bi ? par + (size_t)D * es : NULL, .mean = mt ? mt->data : NULL,
               .inv = it ? it->data : NULL, .D = D, .eps = wf__attr_f(k->op, k->attrs, "epsilon")};
    wf__parallel_for(k, rows, D >= GRAIN / 4 ? 1 : GRAIN / 4 / D, ln_range, &L);
    if (owned) {
        wf__convert(owned, WF_F32, y->data, y->dtype, y->size);
        wf__free(owned);
    }
    wf__free(par);
    return NULL;
}

/* ---- Dropout (inference) ------------------------------------------------------------------------------ */

wf_status *wf__k_dropout(wf__kctx *k)
{
    wf_tensor *x = k->in[0];
    const wf_tensor *tm = k->n_in > 2 ? k->in[2] : NULL;
    if (tm && tm->size >= 1 && wf__load_i64(tm->data, tm->dtype, 0) != 0)
        return wf__kctx_fail(k, WF_UNIMPLEMENTED, "training mode not supported yet");
    WF__TRY(wf__kctx_output_view(k, 0, 0, x->rank, x->dims));
    if (k->n_out > 1) {
        wf_tensor *mask;
        WF__TRY(wf__kctx_output(k, 1, WF_BOOL, x->rank, x->dims, &mask));
        if (mask->size) memset(mask->data, 1, (size_t)mask->size);
    }
    return NULL;
}
