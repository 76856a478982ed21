/*
 * MaxPool2D, AvgPool2D and GlobalAvgPool on the CPU.
 *
 * MaxPool2D and AvgPool2D: f32 takes weft's separable kernel on plain NCHW
 * (pool_sep_f32). Issue 14 asked for oneDNN's pooling wherever its semantics match, and that is what ran
 * before; but oneDNN 2.6's jit pooling works only on channel-blocked layouts, so on our NCHW tensors
 * every pool paid a reorder in and a reorder out, and its max drops NaNs, so every max pool first scanned
 * its input. Measured side by side with ONNX Runtime (bench/bench_pool.py, 2 threads, AVX-512) the
 * separable kernel is 1.3x to 4x faster than that oneDNN path on the pools of SqueezeNet, GoogLeNet,
 * ResNet-50 and DenseNet-121, and level with ORT on most of them (figures in the README). Once level 3
 * keeps blocked layouts between convolutions, a pool inside such a region should take oneDNN's kernel
 * again, on the layout it already has.
 *
 * bf16 and f16 take the same kernel a plane at a time (lowp_pool_planes); they used to take oneDNN's
 * bf16 pooling after a scan for NaN, 5x slower than f32 in a bf16 CNN's training step. Max pools of 2x2
 * windows at stride 2 that tile the plane (a training CNN's) take their own vector kernels instead, f32
 * and bf16 in place (k_pool2x2.h). f64 is a direct C loop. GlobalAvgPool is oneDNN's average over the
 * flattened spatial extent.
 */
#include "k_dnnl.h"
#include "k_pool2x2.h"

#include <math.h>
#include <stdlib.h>

/* lets the separable pool's selects vectorise, as in k_elementwise.c */
#pragma GCC optimize("no-trapping-math")

/* ---- direct loops ----------------------------------------------------------------------------------- */

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

/* f32 pooling on plain NCHW, separably, over blocks of whole planes treated as one flat array:
 * - U[i] combines x[i], x[i + d0*W], ... (the window's k0 rows, starting at every input row);
 * - Z[i] combines U[i], U[i + d1], ... (then its k1 columns, starting at every input column);
 * - an output whose window lies inside its plane is then one element of Z, picked with the strides.
 * Both passes are long contiguous loops that vectorise whatever the plane's width (the 7- and 14-wide
 * planes of late layers included); the stride only thins the final pick. Values whose windows cross a
 * row's or a plane's end are computed and never read. The windows clipped by the image's edges (the
 * padding, the ceil_mode overhang) walk their valid taps: a row clipped above or below is combined on
 * its own from its valid input rows, a column clipped left or right from its valid taps.
 *
 * A rectangular window clipped to the image has (valid rows) x (valid columns) elements, so the divisors
 * are products of per-axis counts; count_include_pad counts the positions inside the padding but not the
 * ceil_mode overhang, as the loop above does. The max propagates NaN (numpy's max), so no NaN scan is
 * needed, and there are no layout reorders. Measured with bench/bench_pool.py (2 threads, AVX-512) this
 * is 3x faster than oneDNN's pooling on a channel-blocked copy with the reorders in and out, which it
 * replaced for f32 (the numbers are in the README). When the block buffers cannot be allocated the
 * range takes the loop above. */

/* max(a, b), NaN if either is NaN; two selects without a branch, so the loops vectorise */
static inline float sep_max(float a, float b)
{
    float m = a > b ? a : b;
    return a != a ? a : m;
}

/* The valid taps [*t0, *t1) of window position o along an axis of n inputs; the taps' inputs are
 * o*s - pb + t*d. Returns how many taps fall inside the padded extent [-pb, n + pe). */
static int64_t sep_taps(int64_t o, int64_t n, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, int64_t *t0,
                        int64_t *t1)
{
    int64_t base = o * s - pb, lo = 0, hi = k, padded = 0;
    while (lo < k && base + lo * d < 0) lo++;
    while (hi > lo && base + (hi - 1) * d >= n) hi--;
    for (int64_t t = 0; t < k; t++) padded += base + t * d >= -pb && base + t * d < n + pe;
    *t0 = lo, *t1 = hi;
    return padded;
}

/* dst[i] = src[i] op src[i + step] op ... (k taps) for i < n; k >= 1. Two and three taps (the usual
 * windows) are one pass; more take one pass per tap. */
#define SEP_PASS(EXPR2, EXPR3, OP)                                                                         \
    do {                                                                                                   \
        if (k_ == 2) {                                                                                     \
            _Pragma("omp simd") for (int64_t i = 0; i < n_; i++) d_[i] = EXPR2;                            \
        } else if (k_ == 3) {                                                                              \
            _Pragma("omp simd") for (int64_t i = 0; i < n_; i++) d_[i] = EXPR3;                            \
        } else {                                                                                           \
            _Pragma("omp simd") for (int64_t i = 0; i < n_; i++) d_[i] = s_[i];                            \
            for (int64_t t_ = 1; t_ < k_; t_++) {                                                          \
                const float *q_ = s_ + t_ * st_;                                                           \
                _Pragma("omp simd") for (int64_t i = 0; i < n_; i++) d_[i] = OP(q_[i], d_[i]);             \
            }                                                                                              \
        }                                                                                                  \
    } while (0)
#define SEP_ADD(a, b) ((a) + (b))
#define SEP_COMB(dst, src, n, k, step, is_max)                                                             \
    do {                                                                                                   \
        float *d_ = (dst);                                                                                 \
        const float *s_ = (src);                                                                           \
        int64_t n_ = (n), st_ = (step), k_ = (k);                                                          \
        if (is_max)                                                                                        \
            SEP_PASS(sep_max(s_[i + st_], s_[i]), sep_max(s_[i + 2 * st_], sep_max(s_[i + st_], s_[i])),   \
                     sep_max);                                                                             \
        else                                                                                               \
            SEP_PASS(s_[i] + s_[i + st_], s_[i] + s_[i + st_] + s_[i + 2 * st_], SEP_ADD);                 \
    } while (0)

/* Per output position along one axis: the valid taps [t0, t1) and the taps inside the padded extent */
typedef struct sep_axis {
    int64_t t0, t1, padded;
} sep_axis;

enum { SEP_BLOCK = 16384 }; /* floats per block of planes: U and Z stay in L2 */

WF__VEC static void pool_sep_f32(void *arg, int64_t p0, int64_t p1)
{
    const pool_arg *r = arg;
    const wf__nn_window *wn = r->wn;
    int64_t oh = wn->out[0], ow = wn->out[1], H = r->h, W = r->w, HW = H * W, OW = oh * W;
    int64_t k0 = wn->k[0], s0 = wn->s[0], d0 = wn->d[0], k1 = wn->k[1], s1 = wn->s[1], d1 = wn->d[1];
    int64_t pb0 = wn->pb[0], pb1 = wn->pb[1], span1 = (k1 - 1) * d1;
    bool mx = r->is_max;
    float init = mx ? -INFINITY : 0.0f;
    int64_t B = OW > 0 && OW < SEP_BLOCK ? SEP_BLOCK / OW : 1, L = B * OW;
    float *buf = wf__malloc((size_t)(2 * L) * sizeof *buf + (size_t)(oh + ow) * sizeof(sep_axis));
    if (!buf) {
        pool_f32(arg, p0, p1);
        return;
    }
    float *ub = buf, *zb = ub + L;
    sep_axis *ra = (sep_axis *)(zb + L), *ca = ra + oh;
    /* the output rows whose windows lie inside the image, [r_lo, r_hi), and columns likewise */
    int64_t r_lo = 0, r_hi = 0;
    for (int64_t yh = 0; yh < oh; yh++) {
        ra[yh].padded = sep_taps(yh, H, k0, s0, d0, pb0, wn->pe[0], &ra[yh].t0, &ra[yh].t1);
        if (ra[yh].t0 == 0 && ra[yh].t1 == k0) {
            if (r_hi == r_lo) r_lo = yh;
            r_hi = yh + 1;
        }
    }
    for (int64_t yw = 0; yw < ow; yw++) ca[yw].padded = sep_taps(yw, W, k1, s1, d1, pb1, wn->pe[1], &ca[yw].t0, &ca[yw].t1);
    int64_t c_lo = (pb1 + s1 - 1) / s1, c_hi = W - 1 - span1 + pb1 >= 0 ? (W - 1 - span1 + pb1) / s1 + 1 : 0;
    if (c_hi > ow) c_hi = ow;
    if (c_lo > ow) c_lo = ow;
    if (c_hi < c_lo) c_hi = c_lo;
    for (int64_t q0 = p0; q0 < p1; q0 += B) {
        int64_t nb = p1 - q0 < B ? p1 - q0 : B;
        const float *xb = (const float *)r->x + q0 * HW;
        /* U: the window's rows combined, oh rows of W per plane. With stride 1 and as many output rows as
         * input rows, U and X line up across the whole block, so the inner rows of every plane are one
         * loop (the rows between two planes' inner rows are computed there and written again below). */
        bool whole = s0 == 1 && oh == H && r_hi > r_lo;
        if (whole) SEP_COMB(ub + r_lo * W, xb + (r_lo - pb0) * W, ((nb - 1) * oh + r_hi - r_lo) * W, k0, d0 * W, mx);
        for (int64_t p = 0; p < nb; p++) {
            const float *x = xb + p * HW;
            float *u = ub + p * OW;
            if (!whole && s0 == 1 && r_hi > r_lo)
                SEP_COMB(u + r_lo * W, x + (r_lo - pb0) * W, (r_hi - r_lo) * W, k0, d0 * W, mx);
            for (int64_t yh = 0; yh < oh; yh++) {
                int64_t a0 = ra[yh].t0, a1 = ra[yh].t1, ih0 = yh * s0 - pb0;
                bool inner = yh >= r_lo && yh < r_hi;
                if (inner && s0 == 1) {
                    yh = r_hi - 1;
                    continue;
                }
                if (a1 > a0) SEP_COMB(u + yh * W, x + (ih0 + a0 * d0) * W, W, a1 - a0, d0 * W, mx);
                else
                    _Pragma("omp simd") for (int64_t w = 0; w < W; w++) u[yh * W + w] = init;
            }
        }
        /* Z: then the window's columns, over the whole block. With stride 1 and as many output columns as
         * input columns, Z is Y itself (shifted by the left padding); the values that straddle two rows
         * land on edge columns, written again below. */
        float *yb = (float *)r->y + q0 * oh * ow;
        bool direct = s1 == 1 && ow == W;
        if (direct) {
            int64_t n = nb * OW - (span1 > pb1 ? span1 : pb1);
            if (n > 0) SEP_COMB(yb + pb1, ub, n, k1, d1, mx);
        }
        const float *z = ub;
        if (!direct && k1 > 1 && nb * OW - span1 > 0) {
            SEP_COMB(zb, ub, nb * OW - span1, k1, d1, mx);
            z = zb;
        }
        for (int64_t p = 0; p < nb && (!direct || !mx); p++) {
            for (int64_t yh = 0; yh < oh; yh++) {
                int64_t rows = r->include_pad ? ra[yh].padded : ra[yh].t1 - ra[yh].t0;
                const float *zr = z + p * OW + yh * W;
                float sc = rows ? 1.0f / (float)(rows * k1) : NAN, *yr = yb + p * oh * ow + yh * ow;
                /* zr[yw * s1 - pb1] is output yw's window for yw in [c_lo, c_hi) */
                if (direct)
                    _Pragma("omp simd") for (int64_t yw = c_lo; yw < c_hi; yw++) yr[yw] *= sc;
                else if (mx && s1 == 1)
                    _Pragma("omp simd") for (int64_t yw = c_lo; yw < c_hi; yw++) yr[yw] = zr[yw - pb1];
                else if (mx)
                    for (int64_t yw = c_lo; yw < c_hi; yw++) yr[yw] = zr[yw * s1 - pb1];
                else if (s1 == 1)
                    _Pragma("omp simd") for (int64_t yw = c_lo; yw < c_hi; yw++) yr[yw] = zr[yw - pb1] * sc;
                else
                    for (int64_t yw = c_lo; yw < c_hi; yw++) yr[yw] = zr[yw * s1 - pb1] * sc;
            }
        }
        /* the columns whose windows the left or right edge clips, a column at a time down the block */
        for (int64_t yw = 0; yw < ow; yw++) {
            if (yw == c_lo) yw = c_hi;
            if (yw >= ow) break;
            int64_t b0 = ca[yw].t0, nt = ca[yw].t1 - b0, off = yw * s1 - pb1 + b0 * d1;
            float *y0 = yb + yw;
            for (int64_t p = 0; p < nb; p++)
                for (int64_t yh = 0; yh < oh; yh++) {
                    const float *v = nt ? ub + p * OW + yh * W + off : ub;
                    float acc;
                    if (mx)
                        acc = nt == 1 ? v[0] : nt == 2 ? sep_max(v[d1], v[0]) : init;
                    else
                        acc = nt == 1 ? v[0] : nt == 2 ? v[0] + v[d1] : init;
                    for (int64_t t = nt > 2 ? 0 : nt; t < nt; t++) acc = mx ? sep_max(v[t * d1], acc) : acc + v[t * d1];
                    if (!mx) {
                        int64_t div = r->include_pad ? ra[yh].padded * ca[yw].padded : (ra[yh].t1 - ra[yh].t0) * nt;
                        acc = div ? acc / (float)div : NAN;
                    }
                    y0[(p * oh + yh) * ow] = acc;
                }
        }
    }
    wf__free(buf);
}

/* ---- 2x2 max pools at stride 2 ------------------------------------------------------------------------
 * Windows that tile the plane without padding (the pools of training CNNs): N windows at a time from two
 * rows in vector extensions (k_pool2x2.h), f32 as is and bf16 in place (its planes went through f32 copies
 * before). The taps combine in pool_sep_f32's order (the two rows, then the two columns) with sep_max, so
 * the results are the same bits, NaN included. */
#define VMAX(VI, p, q)                                                                                     \
    __extension__({                                                                                        \
        VI gt_ = (p) > (q), na_ = (p) != (p);                                                              \
        VI m_ = (gt_ & (VI)(p)) | (~gt_ & (VI)(q));                                                        \
        (na_ & (VI)(p)) | (~na_ & m_);                                                                     \
    })
/* y[0..N) = the max of N windows: the rows, then the columns, as pool_sep_f32 combines them */
#define MAX2X2_Z(VI, a, b, c, d) VMAX(VI, (__typeof__(a))VMAX(VI, d, b), (__typeof__(a))VMAX(VI, c, a))
#define MAX2X2_F32(NAME, VF, VI, N)                                                                          \
    static inline __attribute__((always_inline)) void NAME(const float *r0, const float *r1, float *y)     \
    {                                                                                                      \
        WF__TAPS_F32(VF, N, r0, r1, a, b, c, d);                                                           \
        VI z = MAX2X2_Z(VI, a, b, c, d);                                                                   \
        memcpy(y, &z, sizeof z);                                                                           \
    }
#define MAX2X2_BF16(NAME, VU, VH, VF, VI)                                                                  \
    static inline __attribute__((always_inline)) void NAME(const uint16_t *r0, const uint16_t *r1,         \
                                                           uint16_t *y)                                    \
    {                                                                                                      \
        WF__TAPS_BF16(VU, VF, r0, r1, a, b, c, d);                                                         \
        WF__BF16_NARROW(VU, VH, y, MAX2X2_Z(VI, a, b, c, d));                                              \
    }
MAX2X2_F32(max2x2_8, wf__v8f, wf__v8i, 8)
MAX2X2_F32(max2x2_4, wf__v4f, wf__v4i, 4)
MAX2X2_BF16(max2x2_bf16_8, wf__v8u, wf__v8h, wf__v8f, wf__v8i)
MAX2X2_BF16(max2x2_bf16_4, wf__v4u, wf__v4h, wf__v4f, wf__v4i)

#define MX_GROUP(F, j) F(r0 + 2 * (j), r1 + 2 * (j), y + (j))
#define MX_PADDED(F4)                                                                                      \
    do {                                                                                                   \
        __typeof__(*y) t0[8] = {0}, t1[8] = {0}, o[4];                                                     \
        size_t es = sizeof *y;                                                                             \
        memcpy(t0, r0, 2 * (size_t)n * es), memcpy(t1, r1, 2 * (size_t)n * es);                            \
        F4(t0, t1, o);                                                                                     \
        memcpy(y, o, (size_t)n * es);                                                                      \
    } while (0)
#define MAX2X2_RANGE(NAME, S, F8, F4)                                                                      \
    WF__VEC static void NAME(void *arg, int64_t p0, int64_t p1)                                            \
    {                                                                                                      \
        const pool_arg *ra = arg;                                                                          \
        int64_t oh = ra->wn->out[0], n = ra->wn->out[1], H = ra->h, W = ra->w;                             \
        for (int64_t p = p0; p < p1; p++)                                                                  \
            for (int64_t yh = 0; yh < oh; yh++) {                                                          \
                const S *r0 = (const S *)ra->x + (p * H + 2 * yh) * W, *r1 = r0 + W;                      \
                S *y = (S *)ra->y + (p * oh + yh) * n;                                                     \
                WF__ROW_2X2(n, MX_GROUP, F8, F4, MX_PADDED);                                               \
            }                                                                                              \
    }
MAX2X2_RANGE(max2x2_f32, float, max2x2_8, max2x2_4)
MAX2X2_RANGE(max2x2_bf16, uint16_t, max2x2_bf16_8, max2x2_bf16_4)

/* whether a pool is MAX2X2_RANGE's: max, 2x2 at stride 2, no dilation or padding, no window clipped */
static bool is_max2x2(const pool_arg *r)
{
    const wf__nn_window *wn = r->wn;
    return r->is_max && wn->k[0] == 2 && wn->k[1] == 2 && wn->s[0] == 2 && wn->s[1] == 2 && wn->d[0] == 1 &&
           wn->d[1] == 1 && !wn->pb[0] && !wn->pb[1] && 2 * wn->out[0] <= r->h && 2 * wn->out[1] <= r->w;
}

/* ---- oneDNN pooling ------------------------------------------------------------------------------------
 * ONNX's ceil_mode adds output positions whose windows run past the end padding. Giving oneDNN that
 * overhang as extra end padding is exact for max (padding never wins) and for avg_exclude_padding
 * (padding is never counted), but avg_include_padding would count it while ONNX's count_include_pad does
 * not: that one combination stays in C. Results are computed in f32 rather than the loops' double. */

typedef struct pool_geom {
    int64_t n, c, h, w;          /* the source as 4-D NCHW */
    int64_t k[2], s[2], d[2];    /* d: oneDNN dilation (ONNX's minus 1) */
    int64_t pb[2], pe[2];        /* pe includes the ceil overhang */
    int64_t oh, ow;
    dnnl_alg_kind_t alg;
    dnnl_data_type_t dt;
    bool blocked;                /* pool on a channel-blocked copy (see pool_build) */
    bool src_blk;                /* the source is already in wf__dn_blocked_tag's layout (level 3) */
} pool_geom;

/* oneDNN's jit pooling works on channel-blocked layouts only (on plain NCHW it takes a scalar loop that
 * is slower than ours), so the source is reordered to nChw8c (nChw16c with AVX-512) and the result back. */
static wf_status *pool_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
{
    const pool_geom *g = arg;
    dnnl_dims_t sd = {g->n, g->c, g->h, g->w}, dd = {g->n, g->c, g->oh, g->ow};
    dnnl_dims_t ks = {g->k[0], g->k[1]}, st = {g->s[0], g->s[1]}, dl = {g->d[0], g->d[1]};
    dnnl_dims_t pl = {g->pb[0], g->pb[1]}, pr = {g->pe[0], g->pe[1]};
    /* the pool's own blocked copy: nChw16c / nChw8c (the conv layout may be nhwc, see k_dnnl.c) */
    dnnl_format_tag_t blk = dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core ? dnnl_aBcd16b : dnnl_aBcd8b;
    dnnl_format_tag_t src_tag = g->src_blk ? wf__dn_blocked_tag() : dnnl_abcd;
    dnnl_memory_desc_t dany;
    dnnl_pooling_v2_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t rc;
    const char *what = "pooling memory descriptor";
    if ((rc = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_SRC], 4, sd, g->dt, src_tag)) ||
        (rc = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_DST], 4, dd, g->dt, dnnl_abcd)) ||
        (rc = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_SRC_PRIM], 4, sd, g->dt,
                                           g->src_blk ? src_tag : g->blocked ? blk : dnnl_abcd)) ||
        (rc = dnnl_memory_desc_init_by_tag(&dany, 4, dd, g->dt, g->blocked ? dnnl_format_tag_any : dnnl_abcd)))
        goto fail;
    what = "pooling descriptor";
    if ((rc = dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, g->alg, &p->md[WF__DN_SRC_PRIM], &dany,
                                                st, ks, dl, pl, pr)))
        goto fail;
    what = "pooling attributes";
    if ((rc = wf__dn_attr(WF__ACT_NONE, 0, &attr))) goto fail;
    what = "pooling primitive descriptor";
    if ((rc = dnnl_primitive_desc_create(&pd, &desc, attr, eng, NULL))) goto fail;
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->md[WF__DN_DST_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    what = "pooling source reorder";
    if (!dnnl_memory_desc_equal(&p->md[WF__DN_SRC_PRIM], &p->md[WF__DN_SRC]) &&
        (rc = wf__dn_reorder_create(eng, &p->md[WF__DN_SRC], &p->md[WF__DN_SRC_PRIM], &p->sreorder, &p->sscratch)))
        goto fail;
    what = "pooling destination reorder";
    if (!dnnl_memory_desc_equal(&p->md[WF__DN_DST_PRIM], &p->md[WF__DN_DST]) &&
        (rc = wf__dn_reorder_create(eng, &p->md[WF__DN_DST_PRIM], &p->md[WF__DN_DST], &p->dreorder, &p->dscratch)))
        goto fail;
    what = "pooling primitive";
    rc = dnnl_primitive_create(&p->prim, pd);
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    /* no oneDNN implementation (bf16 without AVX-512, say): cache the entry without a primitive, so the
     * node takes the C loop without asking oneDNN again on every run */
    if (rc == dnnl_unimplemented) {
        if (p->sreorder) dnnl_primitive_destroy(p->sreorder);
        if (p->dreorder) dnnl_primitive_destroy(p->dreorder);
        p->sreorder = p->dreorder = NULL;
        return NULL;
    }
    return rc == dnnl_success ? NULL : wf__dn_fail(k, rc, what);
}

/* Runs the pooling g through oneDNN; *done is false when oneDNN has no implementation for it. */
static wf_status *pool_dnnl(wf__kctx *k, const pool_geom *g, const void *x, void *y, bool *done)
{
    *done = false;
    int64_t key[WF__DN_KEY_MAX];
    int nk = 0;
    const int64_t fields[] = {'P', g->alg, g->dt, g->blocked | g->src_blk << 1, g->n, g->c, g->h, g->w, g->k[0], g->k[1], g->s[0],
                              g->s[1], g->d[0], g->d[1], g->pb[0], g->pb[1], g->pe[0], g->pe[1], g->oh, g->ow};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) key[nk++] = fields[i];
    wf__dn_prim *p;
    WF__TRY(wf__dn_acquire(k, key, nk, pool_build, (void *)g, &p));
    wf_status *s = NULL;
    wf__dn_run *r = NULL;
    void *abuf = NULL, *sbuf = NULL, *dbuf = NULL;
    if (!p->prim) goto done;
    *done = true;
    if ((s = wf__dn_run_get(k, p, &r))) goto done;
    size_t sb = p->sreorder ? (dnnl_memory_desc_get_size(&p->md[WF__DN_SRC_PRIM]) + WF__ALIGN - 1) / WF__ALIGN * WF__ALIGN
                            : 0;
    size_t db = p->dreorder ? dnnl_memory_desc_get_size(&p->md[WF__DN_DST_PRIM]) : 0;
    if (sb + db) {
        if ((s = wf__dn_run_buf(k, r, WF__DN_BUF_ACT, sb + db, &abuf))) goto done;
        sbuf = p->sreorder ? abuf : NULL;
        dbuf = p->dreorder ? (char *)abuf + sb : NULL;
    }
    if (sbuf && (s = wf__dn_reorder(k, r, WF__DN_SLOT_SREORDER, p->sreorder, &p->md[WF__DN_SRC], x,
                                    &p->md[WF__DN_SRC_PRIM], sbuf, &p->sscratch)))
        goto done;
    int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    const dnnl_memory_desc_t *mds[2] = {&p->md[sbuf ? WF__DN_SRC_PRIM : WF__DN_SRC],
                                        &p->md[dbuf ? WF__DN_DST_PRIM : WF__DN_DST]};
    void *ptrs[2] = {sbuf ? sbuf : (void *)x, dbuf ? dbuf : y};
    if ((s = wf__dn_exec(k, r, WF__DN_SLOT_PRIM, p->prim, 2, ids, mds, ptrs, &p->scratch))) goto done;
    if (dbuf)
        s = wf__dn_reorder(k, r, WF__DN_SLOT_DREORDER, p->dreorder, &p->md[WF__DN_DST_PRIM], dbuf, &p->md[WF__DN_DST], y,
                           &p->dscratch);
done:
    wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    return s;
}

/* f32 pooling on the CPU's channel-blocked layout (level 3, lower/layout.c keeps a value blocked through a
 * pool between convolutions): the source seen as P planes of H x W vectors of V floats, where nhwc is
 * one plane per image with V = C and nChw8c / nChw16c is one plane per block of 8 or 16 channels. Each
 * output vector combines the window's valid taps vector by vector, so the loop over V vectorises (C
 * contiguous floats in nhwc). The result is in the same layout. Windows, divisors (count_include_pad
 * counts the padding but not the ceil_mode overhang), NaN (the max propagates it) and empty windows (max
 * -inf, average NaN) are pool_f32's. */
typedef struct bpool_arg {
    const wf__nn_window *wn;
    int64_t h, w, v, oh, ow;
    const float *x;
    float *y;
    bool is_max, include_pad;
} bpool_arg;

WF__VEC static void bpool_range(void *arg, int64_t r0, int64_t r1)
{
    const bpool_arg *r = arg;
    const wf__nn_window *wn = r->wn;
    const int64_t V = r->v, H = r->h, W = r->w;
    for (int64_t row = r0; row < r1; row++) {
        int64_t p = row / r->oh, yh = row % r->oh, a0, a1, b0, b1;
        int64_t pad_h = sep_taps(yh, H, wn->k[0], wn->s[0], wn->d[0], wn->pb[0], wn->pe[0], &a0, &a1);
        const float *x = r->x + p * H * W * V;
        float *y = r->y + (p * r->oh + yh) * r->ow * V;
        for (int64_t yw = 0; yw < r->ow; yw++, y += V) {
            int64_t pad_w = sep_taps(yw, W, wn->k[1], wn->s[1], wn->d[1], wn->pb[1], wn->pe[1], &b0, &b1);
            float init = r->is_max ? -INFINITY : 0.0f;
            _Pragma("omp simd") for (int64_t c = 0; c < V; c++) y[c] = init;
            for (int64_t a = a0; a < a1; a++) {
                int64_t ih = yh * wn->s[0] - wn->pb[0] + a * wn->d[0];
                for (int64_t b = b0; b < b1; b++) {
                    const float *t = x + (ih * W + yw * wn->s[1] - wn->pb[1] + b * wn->d[1]) * V;
                    if (r->is_max) {
                        _Pragma("omp simd") for (int64_t c = 0; c < V; c++) y[c] = sep_max(y[c], t[c]);
                    } else {
                        _Pragma("omp simd") for (int64_t c = 0; c < V; c++) y[c] += t[c];
                    }
                }
            }
            if (!r->is_max) {
                int64_t div = r->include_pad ? pad_h * pad_w : (a1 - a0) * (b1 - b0);
                float inv = div ? 1.0f / (float)div : NAN;
                _Pragma("omp simd") for (int64_t c = 0; c < V; c++) y[c] = div ? y[c] * inv : NAN;
            }
        }
    }
}

/* The same for the channel blocks of AVX2 and AVX-512 (8 and 16 floats), with each block's accumulator a
 * local array of fixed size that stays in a vector register across the window's taps (with V a run-time
 * value the loop above loads and stores y at every tap), and four neighbouring outputs of a row at a time
 * in the row's interior (the columns whose window lies inside the input, found once a call): a max or a
 * sum over the taps is a chain of dependent vector operations, and four independent chains keep the core
 * busy. Only the border columns work out their taps (sep_taps) one output at a time. Every count in the
 * interior loop is a constant, so nothing there is a loop over outputs: an earlier form stored a variable
 * number of outputs (1 or 4), which GCC made a `rep movsq` copy, 20% of the kernel's time (GoogLeNet's
 * 3x3 stride-1 pools 106-261 us each, against ONNX Runtime's 936 us for all 13). ShuffleNetV2's first max
 * pool (24 channels, 112x112 to 56x56, 3x3 at stride 2) took 250-350 us against ONNX Runtime's 45 us
 * before the fixed blocks. */
#define BPOOL_TAP(MAX, VV, acc, t)                                                                             \
    do {                                                                                                       \
        if (MAX)                                                                                               \
            for (int c = 0; c < VV; c++) acc[c] = sep_max(acc[c], (t)[c]);                                     \
        else                                                                                                   \
            for (int c = 0; c < VV; c++) acc[c] += (t)[c];                                                     \
    } while (0)
#define BPOOL_FIXED(NAME, VV, MAX)                                                                             \
    WF__VEC static void NAME(void *arg, int64_t r0, int64_t r1)                                                \
    {                                                                                                          \
        const bpool_arg *r = arg;                                                                              \
        const wf__nn_window *wn = r->wn;                                                                       \
        const int64_t H = r->h, W = r->w, OW = r->ow, k1 = wn->k[1], s1 = wn->s[1], d1 = wn->d[1];             \
        const int64_t pb1 = wn->pb[1], sw = s1 * VV, dw = d1 * VV;                                             \
        /* interior columns [xl, xr): yw s1 - pb1 >= 0 and yw s1 - pb1 + (k1 - 1) d1 <= W - 1 */                \
        int64_t xl = (pb1 + s1 - 1) / s1, last = W - 1 + pb1 - (k1 - 1) * d1;                                  \
        int64_t xr = last < 0 ? xl : last / s1 + 1;                                                            \
        if (xl > OW) xl = OW;                                                                                  \
        if (xr > OW) xr = OW;                                                                                  \
        if (xr < xl) xr = xl;                                                                                  \
        for (int64_t row = r0; row < r1; row++) {                                                              \
            int64_t p = row / r->oh, yh = row % r->oh, a0, a1, b0, b1;                                         \
            int64_t pad_h = sep_taps(yh, H, wn->k[0], wn->s[0], wn->d[0], wn->pb[0], wn->pe[0], &a0, &a1);     \
            const float *x = r->x + p * H * W * VV;                                                            \
            float *y = r->y + (p * r->oh + yh) * OW * VV;                                                      \
            /* the interior's divisor: every horizontal tap counts either way */                               \
            int64_t idiv = (r->include_pad ? pad_h : a1 - a0) * k1;                                            \
            float iinv = idiv ? 1.0f / (float)idiv : NAN;                                                      \
            for (int64_t yw = 0; yw < OW;) {                                                                   \
                if (yw >= xl && yw + 4 <= xr) {                                                                \
                    float acc[4][VV];                                                                          \
                    for (int o = 0; o < 4; o++)                                                                \
                        for (int c = 0; c < VV; c++) acc[o][c] = MAX ? -INFINITY : 0.0f;                       \
                    for (int64_t a = a0; a < a1; a++) {                                                        \
                        const float *t = x + ((yh * wn->s[0] - wn->pb[0] + a * wn->d[0]) * W + yw * s1 - pb1) * VV; \
                        for (int64_t b = 0; b < k1; b++, t += dw) {                                            \
                            BPOOL_TAP(MAX, VV, acc[0], t);                                                     \
                            BPOOL_TAP(MAX, VV, acc[1], t + sw);                                                \
                            BPOOL_TAP(MAX, VV, acc[2], t + 2 * sw);                                            \
                            BPOOL_TAP(MAX, VV, acc[3], t + 3 * sw);                                            \
                        }                                                                                      \
                    }                                                                                          \
                    for (int o = 0; o < 4; o++)                                                                \
                        for (int c = 0; c < VV; c++)                                                           \
                            y[o * VV + c] = MAX ? acc[o][c] : idiv ? acc[o][c] * iinv : NAN;                   \
                    yw += 4;                                                                                   \
                    y += 4 * VV;                                                                               \
                    continue;                                                                                  \
                }                                                                                              \
                int64_t pad_w = sep_taps(yw, W, k1, s1, d1, pb1, wn->pe[1], &b0, &b1);                         \
                float acc[VV];                                                                                 \
                for (int c = 0; c < VV; c++) acc[c] = MAX ? -INFINITY : 0.0f;                                  \
                for (int64_t a = a0; a < a1; a++) {                                                            \
                    const float *t = x + ((yh * wn->s[0] - wn->pb[0] + a * wn->d[0]) * W + yw * s1 - pb1 +    \
                                          b0 * d1) * VV;                                                       \
                    for (int64_t b = b0; b < b1; b++, t += dw) BPOOL_TAP(MAX, VV, acc, t);                     \
                }                                                                                              \
                int64_t div = r->include_pad ? pad_h * pad_w : (a1 - a0) * (b1 - b0);                         \
                float inv = div ? 1.0f / (float)div : NAN;                                                     \
                for (int c = 0; c < VV; c++) y[c] = MAX ? acc[c] : div ? acc[c] * inv : NAN;                   \
                yw++;                                                                                          \
                y += VV;                                                                                       \
            }                                                                                                  \
        }                                                                                                      \
    }
BPOOL_FIXED(bpool_max8, 8, true)
BPOOL_FIXED(bpool_max16, 16, true)
BPOOL_FIXED(bpool_avg8, 8, false)
BPOOL_FIXED(bpool_avg16, 16, false)

/* f16/bf16 pools through pool_sep_f32 a few planes at a time: each task converts its planes into a
 * buffer of its own (they stay in cache) and the result back. f32 holds every f16/bf16 value exactly, and
 * the max's compares and the average's sums ran in f32 before too; whole-tensor copies, and oneDNN's
 * bf16 pooling after a NaN scan of the input, had made a bf16 CNN's pooling 5x slower than f32's. */
typedef struct lowp_pool {
    const pool_arg *r;
    wf_dtype t;
    int64_t x_plane, y_plane; /* elements per plane */
    bool failed;              /* a task's buffer could not be allocated */
} lowp_pool;

static void lowp_pool_planes(void *arg, int64_t p0, int64_t p1)
{
    lowp_pool *lp = arg;
    int64_t nx = lp->x_plane, ny = lp->y_plane;
    /* planes in chunks of about 128 KB of input: pool_sep_f32 sets up per call, so not one plane a call */
    int64_t chunk = nx < 32768 ? 32768 / (nx ? nx : 1) : 1;
    if (chunk > p1 - p0) chunk = p1 - p0;
    float *buf = wf__aligned_alloc((size_t)(chunk * (nx + ny) + 1) * sizeof(float), WF__ALIGN);
    if (!buf) {
        __atomic_store_n(&lp->failed, true, __ATOMIC_RELAXED);
        return;
    }
    size_t es = wf_dtype_size(lp->t);
    pool_arg g = *lp->r;
    g.x = buf, g.y = buf + chunk * nx;
    for (int64_t p = p0; p < p1; p += chunk) {
        int64_t n = p1 - p < chunk ? p1 - p : chunk;
        wf__convert((const char *)lp->r->x + (size_t)(p * nx) * es, lp->t, buf, WF_F32, n * nx);
        pool_sep_f32(&g, 0, n);
        wf__convert(buf + chunk * nx, WF_F32, (char *)lp->r->y + (size_t)(p * ny) * es, lp->t, n * ny);
    }
    wf__aligned_free(buf);
}

wf_status *wf__dn_k_pool(wf__kctx *k)
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
    if (x->dtype == WF_F32 && (k->in_blocked & 1)) {
        /* lowering blocks a pool's source only with its result (lower/layout.c) */
        if (!(k->out_blocked & 1))
            return wf__kctx_fail(k, WF_INTERNAL, "a blocked source needs a blocked result");
        int64_t v = wf__dn_blocked_tag() == dnnl_acdb ? x->dims[1] : wf__dn_channel_block();
        if (v <= 0 || x->dims[1] % v)
            return wf__kctx_fail(k, WF_INTERNAL, "X %s has no whole channel blocks of %lld",
                                 wf__shape_str(x->rank, x->dims, sx), (long long)v);
        bpool_arg br = {&wn, x->dims[2], x->dims[3], v, od[2], od[3], x->data, y->data, r.is_max, r.include_pad};
        int64_t rows = x->dims[0] * (x->dims[1] / v) * od[2];
        wf__parallel_for(k, rows, 32768 / (od[3] * v * wn.k[0] * wn.k[1] + 1) + 1,
                         v == 8 ? (r.is_max ? bpool_max8 : bpool_avg8)
                         : v == 16 ? (r.is_max ? bpool_max16 : bpool_avg16) : bpool_range, &br);
        return NULL;
    }
    if ((x->dtype == WF_F32 || x->dtype == WF_BF16) && is_max2x2(&r)) {
        wf__parallel_for(k, planes, grain, x->dtype == WF_F32 ? max2x2_f32 : max2x2_bf16, &r);
        return NULL;
    }
    if (x->dtype == WF_F32) {
        wf__parallel_for(k, planes, grain, pool_sep_f32, &r);
        return NULL;
    }
    if (x->dtype == WF_F16 || x->dtype == WF_BF16) {
        lowp_pool lp = {&r, x->dtype, x->dims[2] * x->dims[3], od[2] * od[3], false};
        wf__parallel_for(k, planes, grain, lowp_pool_planes, &lp);
        if (lp.failed)
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating f32 plane buffers (%lld floats) on CPU:0",
                                 (long long)(lp.x_plane + lp.y_plane));
        return NULL;
    }
    wf__parallel_for(k, planes, grain, pool_f64, &r);
    return NULL;
}

/* ---- GlobalAvgPool: oneDNN average pooling over the whole (flattened) spatial extent, else a C loop -- */

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

/* Channels-last (acdb) f32 sources of many positions: oneDNN's pooling splits its work by output position,
 * and a global pool has one, so it ran on one thread (EfficientNet-B0's 32 x 112 x 112: 67 us, 24 GB/s).
 * Here the positions are split into GAP_PARTS ranges, each summed over all channels at once (a row of C
 * contiguous floats, which vectorises) into f32 accumulators, folded into f64 every GAP_BLOCK rows; the
 * parts' sums are added in order after the loop, so the result does not depend on the thread count. */
#define GAP_PARTS 8
#define GAP_BLOCK 256
#define GAP_MIN_POSITIONS 512 /* below this oneDNN's single pass is as fast */

typedef struct gapn_arg {
    const float *x;
    int64_t s, c;
    double *part; /* [GAP_PARTS][c] */
    float *acc;   /* [GAP_PARTS][c] f32 block accumulators */
} gapn_arg;

WF__VEC static void gapn_range(void *arg, int64_t p0, int64_t p1)
{
    const gapn_arg *r = arg;
    const int64_t C = r->c;
    for (int64_t p = p0; p < p1; p++) {
        double *tot = r->part + p * C;
        float *acc = r->acc + p * C;
        int64_t b = r->s * p / GAP_PARTS, e = r->s * (p + 1) / GAP_PARTS;
        for (int64_t c = 0; c < C; c++) tot[c] = 0;
        for (int64_t blk = b; blk < e; blk += GAP_BLOCK) {
            int64_t be = e - blk > GAP_BLOCK ? blk + GAP_BLOCK : e;
            for (int64_t c = 0; c < C; c++) acc[c] = 0;
            for (int64_t i = blk; i < be; i++) {
                const float *row = r->x + i * C;
                /* omp simd: acc and row may alias as far as GCC knows, and -O2's cheap cost model does not
                 * version the loop for it (it stayed scalar) */
                _Pragma("omp simd") for (int64_t c = 0; c < C; c++) acc[c] += row[c];
            }
            _Pragma("omp simd") for (int64_t c = 0; c < C; c++) tot[c] += acc[c];
        }
    }
}

/* Whether it ran (false: no memory for the partial sums, and the caller takes oneDNN's path). */
static bool gap_channels_last(wf__kctx *k, const float *x, float *y, int64_t n, int64_t c, int64_t s)
{
    size_t per = (size_t)(GAP_PARTS * c);
    double *part = wf__malloc(per * (sizeof(double) + sizeof(float)));
    if (!part) return false;
    for (int64_t b = 0; b < n; b++) {
        gapn_arg r = {x + b * s * c, s, c, part, (float *)(part + per)};
        wf__parallel_for(k, GAP_PARTS, 1, gapn_range, &r);
        for (int64_t ch = 0; ch < c; ch++) {
            double t = 0;
            for (int p = 0; p < GAP_PARTS; p++) t += part[p * c + ch];
            y[b * c + ch] = (float)(t / (double)s);
        }
    }
    wf__free(part);
    return true;
}

/* nChw8c / nChw16c f32 sources (level 3 on AVX2) whose channels fill whole blocks: each (image, block) sums
 * its cb lanes over the positions, a row of cb contiguous floats at a time, in f32 accumulators folded into
 * f64 every GAP_BLOCK positions (as gapn_range). oneDNN's pooling took 9-11 us a call on MobileNetV3-small's
 * ten squeeze-and-excitation pools (7x7 to 56x56, 20-200 KB: its primitive's execution, not the data). With
 * one position per channel the plain [N, C] result is laid out as the blocked one. */
typedef struct gapb_arg {
    const float *x;
    float *y;
    int64_t s, cb;
} gapb_arg;

WF__VEC static void gapb_range(void *arg, int64_t p0, int64_t p1)
{
    const gapb_arg *r = arg;
    const int64_t cb = r->cb;
    for (int64_t p = p0; p < p1; p++) {
        const float *x = r->x + p * r->s * cb;
        double tot[16] = {0};
        float acc[64];
        for (int64_t blk = 0; blk < r->s; blk += GAP_BLOCK) {
            int64_t be = r->s - blk > GAP_BLOCK ? blk + GAP_BLOCK : r->s, i = blk;
            /* four rows at a time into four accumulators: one chain of adds was bound by the add's latency */
            for (int64_t l = 0; l < 4 * cb; l++) acc[l] = 0;
            for (; i + 4 <= be; i += 4)
                _Pragma("omp simd") for (int64_t l = 0; l < 4 * cb; l++) acc[l] += x[i * cb + l];
            for (; i < be; i++) _Pragma("omp simd") for (int64_t l = 0; l < cb; l++) acc[l] += x[i * cb + l];
            for (int64_t l = 0; l < cb; l++) tot[l] += (double)((acc[l] + acc[cb + l]) + (acc[2 * cb + l] + acc[3 * cb + l]));
        }
        for (int64_t l = 0; l < cb; l++) r->y[p * cb + l] = (float)(tot[l] / (double)r->s);
    }
}

wf_status *wf__dn_k_global_avg_pool(wf__kctx *k)
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
    if (!y->size) return NULL;
    if (x->dtype == WF_F32 && x->rank == 4 && (k->in_blocked & 1) && wf__dn_blocked_tag() == dnnl_acdb &&
        inner >= GAP_MIN_POSITIONS && gap_channels_last(k, x->data, y->data, x->dims[0], x->dims[1], inner))
        return NULL;
    int cb = wf__dn_channel_block();
    if (x->dtype == WF_F32 && x->rank == 4 && (k->in_blocked & 1) && wf__dn_blocked_tag() != dnnl_acdb && cb <= 16 &&
        x->dims[1] % cb == 0 && inner > 0) {
        gapb_arg r = {x->data, y->data, inner, cb};
        wf__parallel_for(k, x->dims[0] * (x->dims[1] / cb), 32768 / (inner * cb) + 1, gapb_range, &r);
        return NULL;
    }
    if ((x->dtype == WF_F32 || x->dtype == WF_BF16) && inner > 0) {
        /* any rank as (N, C, 1, S) with one window over S: the same elements in the same memory order,
         * in plain NCHW and in the blocked layouts alike (level 3 may hand us a blocked 4-D source) */
        pool_geom g = {.n = x->dims[0], .c = x->dims[1], .h = 1, .w = inner, .k = {1, inner}, .s = {1, 1},
                       .oh = 1, .ow = 1, .alg = dnnl_pooling_avg_exclude_padding, .dt = wf__dn_dtype(x->dtype),
                       .blocked = true, .src_blk = x->dtype == WF_F32 && x->rank == 4 && (k->in_blocked & 1)};
        bool done;
        WF__TRY(pool_dnnl(k, &g, x->data, y->data, &done));
        if (done) return NULL;
        if (g.src_blk)
            return wf__kctx_fail(k, WF_UNIMPLEMENTED, "oneDNN has no pooling for the blocked source %s",
                                 wf__shape_str(x->rank, x->dims, sx));
    }
    gap_arg r = {x->data, y->data, inner, x->dtype};
    wf__parallel_for(k, y->size, 32768 / (inner + 1) + 1, gap_range, &r);
    return NULL;
}
