/*
 * CPU kernels for Softmax, LogSoftmax, BatchNormalization (inference), FusedBatchNorm and its gradient
 * (training), LayerNormalization and inference Dropout; listed in k_reduce.c's table. f16/bf16 tensors are widened to f32 once, computed
 * in place and narrowed back, so each loop exists for f32 and f64 only.
 */
#include "backends/cpu/k_dnnl.h"
#include "device/kernel.h"
#include "ops/kutil_reduce.h"

#include <math.h>

/* weft never reads floating-point exception flags; without this GCC refuses to if-convert the clamps
 * and selects in exp_f32, and the softmax loops stay scalar. */
#pragma GCC optimize("no-trapping-math")
/* exp8_f32's 32-byte vectors pass only into an always-inline function (GCC warns for the portable clone) */
#pragma GCC diagnostic ignored "-Wpsabi"


wf_status *wf__k_softmax(wf__kctx *k);
wf_status *wf__k_log_softmax(wf__kctx *k);
wf_status *wf__k_batchnorm(wf__kctx *k);
wf_status *wf__k_fused_batchnorm(wf__kctx *k);
wf_status *wf__k_fused_batchnorm_grad(wf__kctx *k);
wf_status *wf__k_layernorm(wf__kctx *k);
wf_status *wf__k_dropout(wf__kctx *k);

#define LANES 32
#define TW 256
#define GRAIN 32768

/* Adds the LANES partial sums acc[] into acc[0] as a tree of vector steps (Softmax's and BatchNorm's rows).
 * A serial fold into a double, one dependent scalar add per lane, had cost short rows more than their
 * vector work: LayerNorm's rows of 256 (now LN_FOLD's vectors, below) took 28 us for BERT's 128 x 256 on
 * one Zen 3 core, 14 after. */
#define LANE_FOLD(acc)                                                                                  \
    do {                                                                                                \
        _Pragma("GCC unroll 8") for (int w_ = LANES / 2; w_ > 0; w_ /= 2)                               \
            _Pragma("GCC unroll 16") for (int j_ = 0; j_ < w_; j_++) (acc)[j_] += (acc)[j_ + w_];       \
    } while (0)

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
    bool is_log, f64, div; /* div: x / c first (a fused Div, lower/plan.c), into y, then y in place */
    double c;
    /* A fused Add of a mask (lower/plan.c) over rows along the last axis: row u adds the mask's elements
     * from sum over outer dims d of idx_d(u) * ms[d], one per element of the row (NULL: none) */
    const void *mask;
    int nd;
    int64_t od[WF_MAX_RANK], ms[WF_MAX_RANK];
    const void *x;
    void *y;
    int64_t R, inner, ntiles;
} splan;

WF__VEC static void softmax_row_f32(const float *x, float *y, int64_t n, bool is_log);

void wf__softmax_row_f32(const float *x, float *y, int64_t n) { softmax_row_f32(x, y, n, false); }

/* exp_f32 on 8 lanes: the same operations, lane by lane (GCC's vectors), so the same values */
typedef float sv8 __attribute__((vector_size(32)));
typedef int32_t si8 __attribute__((vector_size(32)));
typedef float sv8u __attribute__((vector_size(32), aligned(4)));
#define SV_SEL(m, a, b) ((sv8)(((si8)(m) & (si8)(a)) | (~(si8)(m) & (si8)(b))))

static inline __attribute__((always_inline)) sv8 exp8_f32(sv8 x)
{
    sv8 xc = SV_SEL(x > -87.0f, x, (sv8){0} - 87.0f);
    xc = SV_SEL(xc < 88.0f, xc, (sv8){0} + 88.0f);
    sv8 t = xc * 1.44269504088896341f;
    sv8 n = (t + 12582912.0f) - 12582912.0f;
    sv8 r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    sv8 p = (sv8){0} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    si8 bits = (__builtin_convertvector(n, si8) + 127) * (1 << 23);
    sv8 v = p * (sv8)bits;
    v = SV_SEL(x != x, x, v);
    return SV_SEL(x < -87.0f, (sv8){0}, v);
}

/* The row in explicit vectors: GCC had kept the 32-lane max and sum arrays in memory (a load and a store
 * around every operation; Softmax of 256 rows of 1024 took 0.23 ms on 2 Zen 3 threads, ONNX Runtime 0.10).
 * Lane j is still vector j / 8, lane j % 8, and the lanes fold in the same tree, so the values are the
 * element loop's. */
WF__VEC static void softmax_row_f32(const float *x, float *y, int64_t n, bool is_log)
{
    sv8 a0 = (sv8){0} - INFINITY, a1 = a0, a2 = a0, a3 = a0;
#define SV_MAX(a, v) ((a) = SV_SEL(((v) > (a)) | ((v) != (v)), (v), (a)))
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        sv8 v0 = *(const sv8u *)(x + i), v1 = *(const sv8u *)(x + i + 8);
        sv8 v2 = *(const sv8u *)(x + i + 16), v3 = *(const sv8u *)(x + i + 24);
        SV_MAX(a0, v0), SV_MAX(a1, v1), SV_MAX(a2, v2), SV_MAX(a3, v3);
    }
    float m = -INFINITY;
    for (; i < n; i++) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
    /* the lanes folded as a tree (vector steps), not one by one: for BERT's rows of 128 the two serial folds
     * of 32 lanes cost as much as the rows' vector work (Softmax of 4 x 128 x 128: 40 -> 30 us traced) */
    SV_MAX(a0, a2), SV_MAX(a1, a3), SV_MAX(a0, a1);
#undef SV_MAX
    float acc[8];
    memcpy(acc, &a0, sizeof acc);
    for (int w = 4; w > 0; w /= 2)
        for (int j = 0; j < w; j++) acc[j] = (acc[j + w] > acc[j] || acc[j + w] != acc[j + w]) ? acc[j + w] : acc[j];
    m = (acc[0] > m || acc[0] != acc[0]) ? acc[0] : m;

    double sum = 0;
    for (int64_t b = 0; b < n; b += 4096) {
        int64_t e = n - b > 4096 ? b + 4096 : n;
        sv8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
        for (i = b; i + LANES <= e; i += LANES) {
            sv8 v0 = exp8_f32(*(const sv8u *)(x + i) - m), v1 = exp8_f32(*(const sv8u *)(x + i + 8) - m);
            sv8 v2 = exp8_f32(*(const sv8u *)(x + i + 16) - m), v3 = exp8_f32(*(const sv8u *)(x + i + 24) - m);
            if (!is_log) {
                *(sv8u *)(y + i) = v0, *(sv8u *)(y + i + 8) = v1;
                *(sv8u *)(y + i + 16) = v2, *(sv8u *)(y + i + 24) = v3;
            }
            s0 += v0, s1 += v1, s2 += v2, s3 += v3;
        }
        for (; i < e; i++) {
            float v = exp_f32(x[i] - m);
            if (!is_log) y[i] = v;
            sum += v;
        }
        s0 += s2, s1 += s3, s0 += s1;
        float sl[8];
        memcpy(sl, &s0, sizeof sl);
        for (int w = 4; w > 0; w /= 2)
            for (int j = 0; j < w; j++) sl[j] += sl[j + w];
        sum += sl[0];
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

/* y = x / c over a unit's R rows of w adjacent values `inner` apart (the fused Div's quotients, each
 * element read before it is written). */
WF__VEC static void div_rows_f32(const float *x, float *y, int64_t R, int64_t inner, int64_t w, float c)
{
    for (int64_t r = 0; r < R; r++) FOR_VEC(i, w, y[r * inner + i] = x[r * inner + i] / c);
}

/* Whether op (a Softmax's fused mask, a LayerNormalization's fused skip) adds to X row by row from axis a:
 * X's dtype, f32 or f64, broadcast right-aligned, X's own dims from a on and 1 or X's before it. Then
 * od[0..a) are X's outer dims (0 read as 1) and st the operand's strides over them (0 where it
 * broadcasts). lower/plan.c's row_operand plans exactly these. */
static bool row_operand_fits(const wf_tensor *op, const wf_tensor *x, int a, int64_t *od, int64_t *st)
{
    if (op->dtype != x->dtype || (x->dtype != WF_F32 && x->dtype != WF_F64) || op->rank > x->rank ||
        op->rank < x->rank - a || x->rank < 1)
        return false;
    int64_t ost[WF_MAX_RANK];
    wf__strides(op->rank, op->dims, ost);
    for (int d = 0; d < x->rank; d++) {
        int sd = d - (x->rank - op->rank);
        int64_t m = sd < 0 ? 1 : op->dims[sd];
        if (d >= a ? m != x->dims[d] : m != 1 && m != x->dims[d]) return false;
        if (d < a) {
            od[d] = x->dims[d] > 0 ? x->dims[d] : 1;
            st[d] = sd < 0 || m == 1 ? 0 : ost[sd];
        }
    }
    return true;
}

/* The offset in a broadcast operand (a Softmax's mask, a LayerNormalization's skip) of row u of X, whose
 * outer dims od[0..nd) the operand walks with strides st (0 where it broadcasts). */
static int64_t bcast_row(int nd, const int64_t *od, const int64_t *st, int64_t u)
{
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (u % od[d]) * st[d];
        u /= od[d];
    }
    return off;
}

/* y = x (/ c) + m over one row of n: the Div's quotient, then the Add's sum, each rounded as the nodes
 * round them. */
WF__VEC static void add_row_f32(const float *x, float *y, const float *m, int64_t n, bool div, float c)
{
    if (div) FOR_VEC(i, n, y[i] = x[i] / c + m[i]);
    else FOR_VEC(i, n, y[i] = x[i] + m[i]);
}

static void softmax_range(void *arg, int64_t b, int64_t e)
{
    const splan *S = arg;
    for (int64_t u = b; u < e; u++) {
        if (S->mask) { /* the last axis only (inner 1); the row into y, then y in place */
            int64_t mo = bcast_row(S->nd, S->od, S->ms, u);
            if (S->f64) {
                const double *x = (const double *)S->x + u * S->R, *m = (const double *)S->mask + mo;
                double *y = (double *)S->y + u * S->R;
                for (int64_t r = 0; r < S->R; r++) y[r] = (S->div ? x[r] / S->c : x[r]) + m[r];
                softmax_col_f64(y, y, S->R, 1, S->is_log);
            } else {
                const float *x = (const float *)S->x + u * S->R;
                float *y = (float *)S->y + u * S->R;
                add_row_f32(x, y, (const float *)S->mask + mo, S->R, S->div, (float)S->c);
                softmax_row_f32(y, y, S->R, S->is_log);
            }
            continue;
        }
        if (S->f64) {
            int64_t o = u / S->inner, i = u % S->inner;
            int64_t off = o * S->R * S->inner + i;
            const double *x = (const double *)S->x + off;
            double *y = (double *)S->y + off;
            if (S->div) {
                for (int64_t r = 0; r < S->R; r++) y[r * S->inner] = x[r * S->inner] / S->c;
                x = y;
            }
            softmax_col_f64(x, y, S->R, S->inner, S->is_log);
        } else if (S->inner == 1) {
            const float *x = (const float *)S->x + u * S->R;
            float *y = (float *)S->y + u * S->R;
            if (S->div) div_rows_f32(x, y, 1, 0, S->R, (float)S->c), x = y;
            softmax_row_f32(x, y, S->R, S->is_log);
        } else {
            int64_t o = u / S->ntiles, i0 = (u % S->ntiles) * TW;
            int64_t tw = S->inner - i0 < TW ? S->inner - i0 : TW;
            int64_t off = o * S->R * S->inner + i0;
            const float *x = (const float *)S->x + off;
            float *y = (float *)S->y + off;
            if (S->div) div_rows_f32(x, y, S->R, S->inner, tw, (float)S->c), x = y;
            softmax_tile_f32(x, y, S->R, S->inner, tw, S->is_log);
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
    /* a second input: the one-element divisor of a Div the lowering fused in front (f32 or f64); a
     * third: the mask of an Add fused after that Div (or alone, the divisor then omitted) */
    const wf_tensor *dv = k->n_in > 1 ? k->in[1] : NULL, *mk = k->n_in > 2 ? k->in[2] : NULL;
    if (dv) {
        char b1[160];
        if (dv->dtype != x->dtype || dv->size != 1 || (x->dtype != WF_F32 && x->dtype != WF_F64))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the fused divisor %s%s does not fit X %s%s",
                                 wf_dtype_name(dv->dtype), wf__shape_str(dv->rank, dv->dims, b1),
                                 wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0));
        S.div = true;
        S.c = wf__load_f64(dv->data, dv->dtype, 0);
    }
    int64_t outer = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < a) outer *= x->dims[i];
        else if (i == a) S.R = x->dims[i];
        else S.inner *= x->dims[i];
    }
    if (mk) {
        /* broadcast onto X right-aligned, its last dim X's; over the last axis only */
        char b1[160];
        if (a != x->rank - 1 || !row_operand_fits(mk, x, a, S.od, S.ms))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the fused mask %s%s does not fit X %s%s along axis %d",
                                 wf_dtype_name(mk->dtype), wf__shape_str(mk->rank, mk->dims, b1),
                                 wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0), a);
        S.mask = mk->data;
        S.nd = a;
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
    int64_t blocks;   /* blocked layouts: rows of C = one block's channels, block (row / pixels) % blocks */
    int64_t pixels;
    bool relu;        /* a Relu fused after it (lower/plan.c): max(y, 0), NaN kept */
} bplan;

/* Relu over a row just written (still in cache): x < 0 ? 0 : x keeps NaN */
WF__VEC static void relu_row_f32(float *y, int64_t n)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0 ? 0.0f : y[i];
}

static void relu_row_f64(double *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0 ? 0.0 : y[i];
}

WF__VEC static void affine_f32(const float *x, float *y, int64_t n, float a, float b)
{
    FOR_VEC(i, n, y[i] = x[i] * a + b);
}

WF__VEC static void affine_vec_f32(const float *x, float *y, int64_t n, const float *a, const float *b)
{
    FOR_VEC(i, n, y[i] = x[i] * a[i] + b[i]);
}

/* Level 3's channel-blocked layout (8 or 16 channels a pixel): a work unit is one pixel's block, and a
 * range runs plane by plane (one image's block of channels over its pixels) with the block's scale and
 * shift held in registers. A call per pixel (bn_range's rank-2 rows) cost about 1.5 ns an element:
 * DenseNet-121's 62 pre-activation BatchNormalization+Relu took 13.4 ms of its 57 (traced). */
#define BN_BLOCKED(NAME, VV)                                                                                   \
    WF__VEC static void NAME(void *arg, int64_t b, int64_t e)                                                  \
    {                                                                                                          \
        const bplan *B = arg;                                                                                  \
        for (int64_t u = b; u < e;) {                                                                          \
            int64_t plane = u / B->pixels, end = (plane + 1) * B->pixels < e ? (plane + 1) * B->pixels : e;    \
            const float *af = B->af + plane % B->blocks * VV, *bf = B->bf + plane % B->blocks * VV;            \
            float a[VV], s[VV];                                                                                \
            for (int c = 0; c < VV; c++) a[c] = af[c], s[c] = bf[c];                                           \
            const float *x = (const float *)B->x + u * VV;                                                     \
            float *y = (float *)B->y + u * VV;                                                                 \
            int64_t n = end - u;                                                                               \
            if (B->relu) {                                                                                     \
                for (int64_t p = 0; p < n; p++)                                                                \
                    _Pragma("omp simd") for (int c = 0; c < VV; c++) { /* x < 0 ? 0 : x keeps NaN */           \
                        float v = x[p * VV + c] * a[c] + s[c];                                                 \
                        y[p * VV + c] = v < 0 ? 0.0f : v;                                                      \
                    }                                                                                          \
            } else {                                                                                           \
                for (int64_t p = 0; p < n; p++)                                                                \
                    _Pragma("omp simd") for (int c = 0; c < VV; c++) y[p * VV + c] = x[p * VV + c] * a[c] + s[c]; \
            }                                                                                                  \
            u = end;                                                                                           \
        }                                                                                                      \
    }
BN_BLOCKED(bn_blocked8, 8)
BN_BLOCKED(bn_blocked16, 16)

static void bn_range(void *arg, int64_t b, int64_t e)
{
    const bplan *B = arg;
    for (int64_t u = b; u < e; u++) {
        if (B->S == 1) { /* rank 2: one row of C channels (or a blocked layout's row of a block's channels) */
            int64_t c0 = B->blocks > 1 ? (u / B->pixels) % B->blocks * B->C : 0;
            if (B->f64) {
                const double *x = (const double *)B->x + u * B->C;
                double *y = (double *)B->y + u * B->C;
                for (int64_t c = 0; c < B->C; c++) y[c] = x[c] * B->a[c] + B->b[c];
                if (B->relu) relu_row_f64(y, B->C);
            } else {
                affine_vec_f32((const float *)B->x + u * B->C, (float *)B->y + u * B->C, B->C, B->af + c0, B->bf + c0);
                if (B->relu) relu_row_f32((float *)B->y + u * B->C, B->C);
            }
            continue;
        }
        int64_t c = u % B->C;
        if (B->f64) {
            const double *x = (const double *)B->x + u * B->S;
            double *y = (double *)B->y + u * B->S;
            for (int64_t i = 0; i < B->S; i++) y[i] = x[i] * B->a[c] + B->b[c];
            if (B->relu) relu_row_f64(y, B->S);
        } else {
            affine_f32((const float *)B->x + u * B->S, (float *)B->y + u * B->S, B->S, B->af[c], B->bf[c]);
            if (B->relu) relu_row_f32((float *)B->y + u * B->S, B->S);
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
               .af = af, .bf = bf, .C = C, .S = x->size / (x->dims[0] * C), .relu = k->fused_act == WF__ACT_RELU};
    int64_t units = B.S == 1 ? x->dims[0] : x->dims[0] * C;
    if ((k->in_blocked & 1) && x->dtype == WF_F32 && x->rank == 4) {
        /* level 3's blocked layout (lower/layout.c), the result in it too: nhwc is rows of C channels at
         * every pixel, as rank 2 is; nChw8c / nChw16c rows of one block's channels */
        int64_t v = wf__dn_blocked_tag() == dnnl_acdb ? C : wf__dn_channel_block();
        if (v <= 0 || C % v || !(k->out_blocked & 1)) {
            wf__free(par);
            return wf__kctx_fail(k, WF_INTERNAL, "a blocked X %s needs a blocked result in whole channel blocks",
                                 wf__shape_str(x->rank, x->dims, b0));
        }
        B.C = v;
        B.S = 1;
        B.blocks = C / v;
        B.pixels = x->dims[2] * x->dims[3];
        units = x->size / v;
    }
    int64_t per = B.S == 1 ? B.C : B.S;
    bool fixed = B.blocks > 0 && !B.f64 && (B.C == 8 || B.C == 16);
    wf__parallel_for(k, units, per >= GRAIN ? 1 : GRAIN / per, !fixed ? bn_range : B.C == 8 ? bn_blocked8 : bn_blocked16,
                     &B);
    if (owned) {
        wf__convert(owned, WF_F32, y->data, y->dtype, y->size);
        wf__free(owned);
    }
    wf__free(par);
    return NULL;
}

/* ---- FusedBatchNorm, FusedBatchNormGrad (training) ------------------------------------------------ */

/* Channel c of x [N, C, S...] is N rows of S contiguous values, row n at (n C + c) S. A work unit is a
 * channel: two passes for the statistics (the centred second pass does not cancel) and one that writes
 * y; the gradient reads dy and x once for its two sums and once more to write dx. Sums run in LANES
 * float (or double) partial sums per row, added into a double per row. Rank 2 (S = 1) takes rows of
 * one value: correct, not tuned (BatchNorm over dense features is small beside its MatMuls). */
#define BN_ROW_FNS(T, SUF)                                                                              \
    WF__VEC static double bn_sum_##SUF(const T *x, int64_t n)                                           \
    {                                                                                                   \
        T acc[LANES] = {0};                                                                             \
        double s = 0;                                                                                   \
        int64_t i = 0;                                                                                  \
        for (; i + LANES <= n; i += LANES)                                                              \
            _Pragma("GCC unroll 32") for (int j = 0; j < LANES; j++) acc[j] += x[i + j];                \
        for (; i < n; i++) s += x[i];                                                                   \
        LANE_FOLD(acc);                                                                                 \
        return s + acc[0];                                                                              \
    }                                                                                                   \
    WF__VEC static double bn_dev2_##SUF(const T *x, int64_t n, T m)                                     \
    {                                                                                                   \
        T acc[LANES] = {0};                                                                             \
        double s = 0;                                                                                   \
        int64_t i = 0;                                                                                  \
        for (; i + LANES <= n; i += LANES)                                                              \
            _Pragma("GCC unroll 32") for (int j = 0; j < LANES; j++) acc[j] += (x[i + j] - m) * (x[i + j] - m); \
        for (; i < n; i++) s += (double)(x[i] - m) * (x[i] - m);                                        \
        LANE_FOLD(acc);                                                                                 \
        return s + acc[0];                                                                              \
    }                                                                                                   \
    WF__VEC static void bn_dsums_##SUF(const T *dy, const T *x, int64_t n, T m, double *sdy, double *sdyx) \
    {                                                                                                   \
        T a[LANES] = {0}, b[LANES] = {0};                                                               \
        double s = 0, t = 0;                                                                            \
        int64_t i = 0;                                                                                  \
        for (; i + LANES <= n; i += LANES)                                                              \
            _Pragma("GCC unroll 32") for (int j = 0; j < LANES; j++) {                                  \
                a[j] += dy[i + j];                                                                      \
                b[j] += dy[i + j] * (x[i + j] - m);                                                     \
            }                                                                                           \
        for (; i < n; i++) s += dy[i], t += (double)dy[i] * (x[i] - m);                                 \
        LANE_FOLD(a);                                                                                   \
        LANE_FOLD(b);                                                                                   \
        *sdy += s + a[0], *sdyx += t + b[0];                                                            \
    }                                                                                                   \
    WF__VEC static void bn_norm_##SUF(const T *x, T *y, int64_t n, T m, T a, T o)                       \
    {                                                                                                   \
        FOR_VEC(i, n, y[i] = (x[i] - m) * a + o);                                                       \
    }                                                                                                   \
    WF__VEC static void bn_dx_##SUF(const T *dy, const T *x, T *dx, int64_t n, T m, T k, T q, T mdy, T r) \
    {                                                                                                   \
        FOR_VEC(i, n, dx[i] = (dy[i] - mdy) * k + (x[i] - m) * q + r);                                  \
    }

BN_ROW_FNS(float, f32)
BN_ROW_FNS(double, f64)

typedef struct fbn {
    bool f64;
    const void *x, *dy;     /* f32 or f64 */
    void *y;                /* y or dx */
    int64_t N, C, S;
    double eps;
    const double *scale, *offset, *dmean, *dvar; /* per channel; dmean, dvar may be NULL */
    double *mean, *var;     /* forward: written; gradient: read */
    double *dscale, *doffset;
} fbn;

#define ROW(p, B, n, c, es) ((const char *)(p) + (size_t)(((n) * (B)->C + (c)) * (B)->S) * (es))

static void fbn_fwd_range(void *arg, int64_t b, int64_t e)
{
    const fbn *B = arg;
    size_t es = B->f64 ? 8 : 4;
    double M = (double)B->N * (double)B->S;
    for (int64_t c = b; c < e; c++) {
        double s = 0, v = 0;
        for (int64_t n = 0; n < B->N; n++)
            s += B->f64 ? bn_sum_f64((const double *)ROW(B->x, B, n, c, es), B->S)
                        : bn_sum_f32((const float *)ROW(B->x, B, n, c, es), B->S);
        double m = s / M;
        for (int64_t n = 0; n < B->N; n++)
            v += B->f64 ? bn_dev2_f64((const double *)ROW(B->x, B, n, c, es), B->S, m)
                        : bn_dev2_f32((const float *)ROW(B->x, B, n, c, es), B->S, (float)m);
        v /= M;
        double a = B->scale[c] / sqrt(v + B->eps);
        B->mean[c] = m, B->var[c] = v;
        for (int64_t n = 0; n < B->N; n++) {
            char *y = (char *)B->y + (ROW(B->x, B, n, c, es) - (const char *)B->x);
            if (B->f64) bn_norm_f64((const double *)ROW(B->x, B, n, c, es), (double *)y, B->S, m, a, B->offset[c]);
            else bn_norm_f32((const float *)ROW(B->x, B, n, c, es), (float *)y, B->S, (float)m, (float)a,
                             (float)B->offset[c]);
        }
    }
}

static void fbn_bwd_range(void *arg, int64_t b, int64_t e)
{
    const fbn *B = arg;
    size_t es = B->f64 ? 8 : 4;
    double M = (double)B->N * (double)B->S;
    for (int64_t c = b; c < e; c++) {
        double m = B->mean[c], sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < B->N; n++) {
            if (B->f64) bn_dsums_f64((const double *)ROW(B->dy, B, n, c, es), (const double *)ROW(B->x, B, n, c, es),
                                     B->S, m, &sdy, &sdyx);
            else bn_dsums_f32((const float *)ROW(B->dy, B, n, c, es), (const float *)ROW(B->x, B, n, c, es), B->S,
                              (float)m, &sdy, &sdyx);
        }
        double rstd = 1.0 / sqrt(B->var[c] + B->eps), k = B->scale[c] * rstd;
        B->doffset[c] = sdy;
        B->dscale[c] = sdyx * rstd;
        /* dx = k (dy - sdy / M - xhat rstd sdyx / M) + dmean / M + 2 dvar (x - m) / M. dy's mean is taken
         * off dy before the scaling: folded into the constant (k dy + (-k sdy / M)) it cancelled in f32 when
         * dy is close to its mean (one value per channel: 3e-5 off where dx is exactly dmean). */
        double q = -k * rstd * rstd * sdyx / M + (B->dvar ? 2 * B->dvar[c] / M : 0);
        double mdy = sdy / M, r = B->dmean ? B->dmean[c] / M : 0;
        for (int64_t n = 0; n < B->N; n++) {
            char *dx = (char *)B->y + (ROW(B->x, B, n, c, es) - (const char *)B->x);
            if (B->f64) bn_dx_f64((const double *)ROW(B->dy, B, n, c, es), (const double *)ROW(B->x, B, n, c, es),
                                  (double *)dx, B->S, m, k, q, mdy, r);
            else bn_dx_f32((const float *)ROW(B->dy, B, n, c, es), (const float *)ROW(B->x, B, n, c, es), (float *)dx,
                           B->S, (float)m, (float)k, (float)q, (float)mdy, (float)r);
        }
    }
}

/* The inputs' checks shared with the device plugins (ops/kutil_reduce.h), in this backend's words. */
static wf_status *fbn_check(wf__kctx *k, bool grad, const char *const *pname)
{
    int bad = wf__ku_fbn_bad_input((const wf_tensor *const *)k->in, k->n_in, grad);
    if (bad < 0) return NULL;
    const wf_tensor *x = k->in[grad ? 1 : 0], *p = k->in[bad];
    char b0[160], b1[160], msg[480];
    char s0[160], s1[160];
    snprintf(b0, sizeof b0, "%s%s", wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, s0));
    snprintf(b1, sizeof b1, "%s%s", wf_dtype_name(p->dtype), wf__shape_str(p->rank, p->dims, s1));
    wf__ku_fbn_message((const wf_tensor *const *)k->in, bad, grad, pname, b0, b1, msg, sizeof msg);
    return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s", msg);
}

/* Reads the per-channel inputs in[first..last] (absent ones give NULL) as doubles into par, C each, and
 * allocates `extra` more arrays of C after them. */
static wf_status *fbn_params(wf__kctx *k, int first, int last, int extra, int64_t C, double **par, double **arr)
{
    int n = last - first + 1 + extra;
    size_t bytes = (size_t)(C > 0 ? C : 1) * sizeof(double) * (size_t)n;
    double *p = wf__malloc(bytes);
    if (!p) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
    for (int i = 0; i < n; i++) {
        int idx = first + i;
        const wf_tensor *t = idx <= last && idx < k->n_in ? k->in[idx] : NULL;
        arr[i] = idx <= last && !t ? NULL : p + (size_t)i * (size_t)C;
        if (t)
            for (int64_t c = 0; c < C; c++) arr[i][c] = wf__load_f64(t->data, t->dtype, c);
    }
    *par = p;
    return NULL;
}

static int64_t fbn_grain(int64_t per) { return per >= GRAIN ? 1 : GRAIN / (per > 0 ? per : 1); }

wf_status *wf__k_fused_batchnorm(wf__kctx *k)
{
    static const char *const pname[3] = {"x", "scale", "offset"};
    WF__TRY(fbn_check(k, false, pname));
    wf_tensor *x = k->in[0], *y, *mt, *vt;
    int64_t N, C, S;
    wf__ku_fbn_geom(x, &N, &C, &S);
    bool reused;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &y, &reused));
    WF__TRY(wf__kctx_output(k, 1, x->dtype, 1, &C, &mt));
    WF__TRY(wf__kctx_output(k, 2, x->dtype, 1, &C, &vt));
    if (C == 0) return NULL;
    if (N == 0 || S == 0) { /* statistics of an empty batch */
        for (int64_t c = 0; c < C; c++) wf__store_f64(mt->data, mt->dtype, c, NAN), wf__store_f64(vt->data, vt->dtype, c, NAN);
        return NULL;
    }
    double *par, *arr[4];
    WF__TRY(fbn_params(k, 1, 2, 2, C, &par, arr));
    void *xd, *owned;
    wf_status *st = widen(k, x, &xd, &owned);
    if (st) {
        wf__free(par);
        return st;
    }
    fbn B = {.f64 = is_f64(x->dtype), .x = xd, .y = owned ? owned : y->data, .N = N, .C = C, .S = S,
             .eps = wf__attr_f(k->op, k->attrs, "epsilon"), .scale = arr[0], .offset = arr[1], .mean = arr[2],
             .var = arr[3]};
    wf__parallel_for(k, C, fbn_grain(N * S), fbn_fwd_range, &B);
    if (owned) {
        wf__convert(owned, WF_F32, y->data, y->dtype, y->size);
        wf__free(owned);
    }
    for (int64_t c = 0; c < C; c++)
        wf__store_f64(mt->data, mt->dtype, c, B.mean[c]), wf__store_f64(vt->data, vt->dtype, c, B.var[c]);
    wf__free(par);
    return NULL;
}

wf_status *wf__k_fused_batchnorm_grad(wf__kctx *k)
{
    static const char *const pname[7] = {"dy", "x", "scale", "batch_mean", "batch_variance", "d_mean",
                                         "d_variance"};
    WF__TRY(fbn_check(k, true, pname));
    wf_tensor *dy = k->in[0], *x = k->in[1], *dx, *ds, *dof;
    int64_t N, C, S;
    wf__ku_fbn_geom(x, &N, &C, &S);
    bool reused;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, x->dtype, x->rank, x->dims, &dx, &reused));
    WF__TRY(wf__kctx_output(k, 1, x->dtype, 1, &C, &ds));
    WF__TRY(wf__kctx_output(k, 2, x->dtype, 1, &C, &dof));
    if (C == 0) return NULL;
    if (N == 0 || S == 0) {
        memset(ds->data, 0, (size_t)C * wf_dtype_size(x->dtype));
        memset(dof->data, 0, (size_t)C * wf_dtype_size(x->dtype));
        return NULL;
    }
    double *par, *arr[7];
    WF__TRY(fbn_params(k, 2, 6, 2, C, &par, arr));
    void *xd, *xo, *dyd, *dyo;
    wf_status *st = widen(k, x, &xd, &xo);
    if (!st) st = widen(k, dy, &dyd, &dyo);
    if (st) {
        wf__free(xo);
        wf__free(par);
        return st;
    }
    fbn B = {.f64 = is_f64(x->dtype), .x = xd, .dy = dyd, .y = dyo ? dyo : dx->data, .N = N, .C = C, .S = S,
             .eps = wf__attr_f(k->op, k->attrs, "epsilon"), .scale = arr[0], .mean = arr[1], .var = arr[2],
             .dmean = arr[3], .dvar = arr[4], .dscale = arr[5], .doffset = arr[6]};
    wf__parallel_for(k, C, fbn_grain(N * S), fbn_bwd_range, &B);
    if (dyo) {
        wf__convert(dyo, WF_F32, dx->data, dx->dtype, dx->size);
        wf__free(dyo);
    }
    wf__free(xo);
    for (int64_t c = 0; c < C; c++)
        wf__store_f64(ds->data, ds->dtype, c, B.dscale[c]), wf__store_f64(dof->data, dof->dtype, c, B.doffset[c]);
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
    /* SkipLayerNormalization (lower/plan.c): X + skip is normalised, the skip's row of row u starting at
     * sum over outer dims d of idx_d(u) * ss[d] (NULL: none) */
    const void *skip;
    int nd;
    int64_t od[WF_MAX_RANK], ss[WF_MAX_RANK];
} lplan;

/* 32 float lanes as four vectors of 8 (each clone of WF__VEC lowers them to its ISA), folded in
 * LANE_FOLD's order, so a row's sums are the same bits on every ISA. */
typedef float ln_v8 __attribute__((vector_size(32)));

/* an unaligned load; a macro, as a function returning a vector would change the ABI of WF__VEC's
 * default clone (no AVX) */
#define LN_LOAD(p) ({                                                                                   \
    ln_v8 v_;                                                                                           \
    memcpy(&v_, (p), sizeof v_);                                                                        \
    v_;                                                                                                 \
})

/* the lanes of a0..a3 (vectors, changed) added in LANE_FOLD's order into a float: vector steps down to
 * 8 lanes, then its last three levels on the lanes (element access, which GCC and Clang both take) */
#define LN_FOLD(a0, a1, a2, a3) ({                                                                      \
    a0 += a2;                                                                                           \
    a1 += a3;                                                                                           \
    a0 += a1;                                                                                           \
    ((a0[0] + a0[4]) + (a0[2] + a0[6])) + ((a0[1] + a0[5]) + (a0[3] + a0[7]));                          \
})

/* A row's mean and 1/sqrt(variance + eps), then y. Sums in 32 float lanes per block of 4096, added into
 * a double: BERT's rows of 256 had spent more in a serial fold of the lanes than in their vector work. */
WF__VEC static void ln_row_f32(const float *x, float *y, int64_t D, const float *s, const float *b, double eps,
                               float *mean_out, float *inv_out)
{
    double sum = 0, sq = 0;
    for (int64_t c = 0; c < D; c += 4096) {
        int64_t e = D - c > 4096 ? c + 4096 : D, i = c;
        ln_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (; i + LANES <= e; i += LANES) {
            a0 += LN_LOAD(x + i), a1 += LN_LOAD(x + i + 8);
            a2 += LN_LOAD(x + i + 16), a3 += LN_LOAD(x + i + 24);
        }
        for (; i < e; i++) sum += x[i];
        sum += LN_FOLD(a0, a1, a2, a3);
    }
    double mean = sum / (double)D;
    float mf = (float)mean;
    /* Two passes: the variance of centred values does not cancel catastrophically. */
    for (int64_t c = 0; c < D; c += 4096) {
        int64_t e = D - c > 4096 ? c + 4096 : D, i = c;
        ln_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (; i + LANES <= e; i += LANES) {
            ln_v8 d0 = LN_LOAD(x + i) - mf, d1 = LN_LOAD(x + i + 8) - mf;
            ln_v8 d2 = LN_LOAD(x + i + 16) - mf, d3 = LN_LOAD(x + i + 24) - mf;
            a0 += d0 * d0, a1 += d1 * d1, a2 += d2 * d2, a3 += d3 * d3;
        }
        for (; i < e; i++) sq += (double)(x[i] - mf) * (x[i] - mf);
        sq += LN_FOLD(a0, a1, a2, a3);
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

WF__VEC static void sum_row_f32(const float *a, const float *b, float *y, int64_t n) { FOR_VEC(i, n, y[i] = a[i] + b[i]); }

static void ln_range(void *arg, int64_t b, int64_t e)
{
    const lplan *L = arg;
    for (int64_t u = b; u < e; u++) {
        float *m = L->mean ? L->mean + u : NULL, *v = L->inv ? L->inv + u : NULL;
        if (L->skip) { /* the Add's row into y (elementwise, so y may be X's or the skip's bytes), then in place */
            int64_t so = bcast_row(L->nd, L->od, L->ss, u);
            if (L->f64) {
                const double *x = (const double *)L->x + u * L->D, *sk = (const double *)L->skip + so;
                double *y = (double *)L->y + u * L->D;
                for (int64_t i = 0; i < L->D; i++) y[i] = x[i] + sk[i];
                ln_row_f64(y, y, L->D, L->scale, L->bias, L->eps, m, v);
            } else {
                float *y = (float *)L->y + u * L->D;
                sum_row_f32((const float *)L->x + u * L->D, (const float *)L->skip + so, y, L->D);
                ln_row_f32(y, y, L->D, L->scale, L->bias, L->eps, m, v);
            }
            continue;
        }
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
    /* a fused skip (lower/plan.c's SkipLayerNormalization) is read after the node's own inputs */
    const wf_tensor *sk = k->fused_residual > 0 && k->fused_residual < k->n_in ? k->in[k->fused_residual] : NULL;
    const wf_tensor *sc = k->in[1], *bi = k->n_in > 2 && k->fused_residual != 2 ? k->in[2] : NULL;
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
    lplan L = {.f64 = is_f64(x->dtype)};
    if (sk) {
        if (!row_operand_fits(sk, x, a, L.od, L.ss))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the fused skip %s%s does not fit X %s%s from axis %d",
                                 wf_dtype_name(sk->dtype), wf__shape_str(sk->rank, sk->dims, b1),
                                 wf_dtype_name(x->dtype), wf__shape_str(x->rank, x->dims, b0), a);
        L.skip = sk->data;
        L.nd = a;
    }
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
    bool f64 = L.f64;
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
    L.x = xd;
    L.y = owned ? owned : y->data;
    L.scale = par;
    L.bias = bi ? par + (size_t)D * es : NULL;
    L.mean = mt ? mt->data : NULL;
    L.inv = it ? it->data : NULL;
    L.D = D;
    L.eps = wf__attr_f(k->op, k->attrs, "epsilon");
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
