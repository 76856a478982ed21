/*
 * CPU kernels of the ONNX quantisation ops: QuantizeLinear and DequantizeLinear (per tensor, per axis
 * and blocked), DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv. Integer products accumulate in
 * i64; rounding is to nearest even, as ONNX's reference (numpy's rint) does.
 */
#include "backends/cpu/k_onnx.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "ops/kutil_quant.h"

#define SB WF__KO_SB

/* ---- per-tensor / per-axis / blocked parameters -------------------------------------------------------- */

static wf_status *qmap_init(const wf__kctx *k, const wf_tensor *x, const wf_tensor *p, const char *what,
                            wf__ku_qmap *m)
{
    char b0[SB], b1[SB], err[3 * SB];
    if (!wf__ku_qmap_plan(x->rank, x->dims, wf__shape_str(x->rank, x->dims, b0), p->rank, p->dims, p->size, what,
                          wf__shape_str(p->rank, p->dims, b1), wf__attr_i(k->op, k->attrs, "axis"),
                          wf__attr_i(k->op, k->attrs, "block_size"), m, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    return NULL;
}

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------------------------------------ */

wf_status *wf__k_quantize_linear(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *sc = k->in[1], *zp = wf__ko_has(k, 2) ? k->in[2] : NULL;
    wf_dtype od = (wf_dtype)wf__attr_i(k->op, k->attrs, "output_dtype");
    if (zp) od = zp->dtype;
    if (od == WF_DTYPE_INVALID) od = WF_U8;
    if (od != WF_U8 && od != WF_I8 && od != WF_I16)
        return wf__kctx_fail(k, WF_UNIMPLEMENTED, "quantizing to %s is not supported", wf_dtype_name(od));
    /* x / scale is computed in x's dtype, or in `precision` when given, like the reference. */
    wf_dtype pr = (wf_dtype)wf__attr_i(k->op, k->attrs, "precision");
    if (pr == WF_DTYPE_INVALID) pr = wf__dtype_is_float(x->dtype) ? x->dtype : sc->dtype;
    wf__ku_qmap ms, mz;
    WF__TRY(qmap_init(k, x, sc, "y_scale", &ms));
    if (zp) WF__TRY(qmap_init(k, x, zp, "y_zero_point", &mz));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, od, x->rank, x->dims, &y));
    int64_t lo, hi;
    wf__ku_qrange(od, &lo, &hi);
    for (int64_t i = 0; i < x->size; i++) {
        double v = wf__ko_round(wf__ko_round(wf__load_f64(x->data, x->dtype, i), pr) /
                                    wf__ko_round(wf__load_f64(sc->data, sc->dtype, wf__ku_qmap_index(&ms, i)), pr),
                                pr);
        double r = rint(v);
        int64_t q = isnan(r) ? 0 : r > 4e18 ? INT64_MAX / 2 : r < -4e18 ? INT64_MIN / 2 : (int64_t)r;
        if (zp) q += wf__load_i64(zp->data, zp->dtype, wf__ku_qmap_index(&mz, i));
        q = q < lo ? lo : q > hi ? hi : q;
        wf__store_f64(y->data, od, i, (double)q);
    }
    return NULL;
}

wf_status *wf__k_dequantize_linear(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *sc = k->in[1], *zp = wf__ko_has(k, 2) ? k->in[2] : NULL;
    wf_dtype od = (wf_dtype)wf__attr_i(k->op, k->attrs, "output_dtype");
    if (od == WF_DTYPE_INVALID) od = sc->dtype;
    wf__ku_qmap ms, mz;
    WF__TRY(qmap_init(k, x, sc, "x_scale", &ms));
    if (zp) WF__TRY(qmap_init(k, x, zp, "x_zero_point", &mz));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, od, x->rank, x->dims, &y));
    for (int64_t i = 0; i < x->size; i++) {
        /* the reference widens x to f32 before subtracting */
        double v = (double)(float)wf__load_i64(x->data, x->dtype, i);
        if (zp) v -= (double)wf__load_i64(zp->data, zp->dtype, wf__ku_qmap_index(&mz, i));
        v *= wf__load_f64(sc->data, sc->dtype, wf__ku_qmap_index(&ms, i));
        wf__store_f64(y->data, od, i, wf__ko_round(v, WF_F32));
    }
    return NULL;
}

/* u8 quantisation whose range [min(0, min x), max(0, max x)] maps onto [0, 255], in f32 like ONNX's
 * reference. */
wf_status *wf__k_dynamic_quantize_linear(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    const float *xv = x->data;
    float mx = 0.0f, mn = 0.0f;
    for (int64_t i = 0; i < x->size; i++) {
        if (xv[i] > mx || isnan(xv[i])) mx = xv[i];
        if (xv[i] < mn || isnan(xv[i])) mn = xv[i];
    }
    float scale = (mx == mn ? 1.0f : (mx - mn)) / 255.0f;
    float izp = 0.0f - mn / scale;
    float zp = rintf(izp < 0.0f ? 0.0f : izp > 255.0f ? 255.0f : izp);
    wf_tensor *y, *ys, *yz;
    WF__TRY(wf__kctx_output(k, 0, WF_U8, x->rank, x->dims, &y));
    WF__TRY(wf__kctx_output(k, 1, WF_F32, 0, NULL, &ys));
    WF__TRY(wf__kctx_output(k, 2, WF_U8, 0, NULL, &yz));
    uint8_t *q = y->data;
    for (int64_t i = 0; i < x->size; i++) {
        float v = rintf(xv[i] / scale) + zp;
        q[i] = (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
    }
    *(float *)ys->data = scale;
    *(uint8_t *)yz->data = (uint8_t)zp;
    return NULL;
}

/* ---- integer matmul ------------------------------------------------------------------------------------ */

/* numpy matmul of integer a and b into c (i64), 1-D operands promoted; *rank and dims get the result's
 * shape. Zero points: a scalar each, or a's per row (M values) and b's per column (N values). */
typedef struct {
    int rank;
    int64_t dims[WF_MAX_RANK];
    int64_t M, K, N;
} mm_shape;

static wf_status *mm_plan(const wf__kctx *k, const wf_tensor *a, const wf_tensor *b, mm_shape *s)
{
    char b0[SB], b1[SB];
    if (a->rank < 1 || b->rank < 1) goto bad;
    s->M = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    s->K = a->dims[a->rank - 1];
    s->N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if ((b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0]) != s->K) goto bad;
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, r = ra > rb ? ra : rb;
    for (int d = 0; d < r; d++) {
        int64_t da = d - (r - ra) >= 0 ? a->dims[d - (r - ra)] : 1, db = d - (r - rb) >= 0 ? b->dims[d - (r - rb)] : 1;
        if (da != db && da != 1 && db != 1) goto bad;
        s->dims[d] = da == 1 ? db : da;
    }
    s->rank = r;
    if (a->rank >= 2) s->dims[s->rank++] = s->M;
    if (b->rank >= 2) s->dims[s->rank++] = s->N;
    return NULL;
bad:
    return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "operands %s and %s do not multiply", wf__shape_str(a->rank, a->dims, b0),
                         wf__shape_str(b->rank, b->dims, b1));
}

static wf_status *zp_vec(const wf__kctx *k, int idx, int64_t n, const char *what, const wf_tensor **zp)
{
    char b[SB];
    *zp = wf__ko_has(k, idx) ? k->in[idx] : NULL;
    if (*zp && (*zp)->size != 1 && !((*zp)->rank == 1 && (*zp)->dims[0] == n))
        return wf__kctx_fail(k, WF_UNIMPLEMENTED, "%s %s must be a scalar or have %" PRId64 " values", what,
                             wf__shape_str((*zp)->rank, (*zp)->dims, b), n);
    return NULL;
}

static wf_status *alloc_i64(const wf__kctx *k, int64_t n, const char *what, int64_t **out)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(int64_t);
    *out = wf__calloc(1, bytes);
    if (!*out) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s", bytes, what);
    return NULL;
}

static inline int64_t zp_at(const wf_tensor *zp, int64_t i)
{
    return zp ? wf__load_i64(zp->data, zp->dtype, zp->size == 1 ? 0 : i) : 0;
}

/* c (i64, batch x M x N) = (a - azp) @ (b - bzp) with numpy broadcasting over the batch dims. */
static void mm_run(const wf_tensor *a, const wf_tensor *b, const wf_tensor *azp, const wf_tensor *bzp,
                   const mm_shape *s, int64_t *c)
{
    int br = s->rank - (a->rank >= 2) - (b->rank >= 2);
    int64_t nb = wf__numel(br, s->dims);
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t r = bi, oa = 0, ob = 0, sa = 1, sb = 1;
        for (int d = br - 1; d >= 0; d--) {
            int64_t ci = r % s->dims[d];
            r /= s->dims[d];
            int da = d - (br - ra), db = d - (br - rb);
            if (da >= 0) {
                oa += (a->dims[da] == 1 ? 0 : ci) * sa;
                sa *= a->dims[da];
            }
            if (db >= 0) {
                ob += (b->dims[db] == 1 ? 0 : ci) * sb;
                sb *= b->dims[db];
            }
        }
        oa *= s->M * s->K;
        ob *= s->K * s->N;
        int64_t *cp = c + bi * s->M * s->N;
        for (int64_t m = 0; m < s->M; m++)
            for (int64_t n = 0; n < s->N; n++) {
                int64_t acc = 0, za = zp_at(azp, m), zb = zp_at(bzp, n);
                for (int64_t q = 0; q < s->K; q++)
                    acc += (wf__load_i64(a->data, a->dtype, oa + m * s->K + q) - za) *
                           (wf__load_i64(b->data, b->dtype, ob + q * s->N + n) - zb);
                cp[m * s->N + n] = acc;
            }
    }
}

wf_status *wf__k_matmul_integer(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1], *azp, *bzp;
    mm_shape s;
    WF__TRY(mm_plan(k, a, b, &s));
    WF__TRY(zp_vec(k, 2, s.M, "a_zero_point", &azp));
    WF__TRY(zp_vec(k, 3, s.N, "b_zero_point", &bzp));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, WF_I32, s.rank, s.dims, &y));
    int64_t *c;
    WF__TRY(alloc_i64(k, y->size, "MatMulInteger's accumulators", &c));
    mm_run(a, b, azp, bzp, &s, c);
    for (int64_t i = 0; i < y->size; i++) ((int32_t *)y->data)[i] = (int32_t)c[i];
    wf__free(c);
    return NULL;
}

wf_status *wf__k_qlinear_matmul(wf__kctx *k)
{
    char b0[SB];
    const wf_tensor *a = k->in[0], *b = k->in[3], *azp, *bzp, *yzp = wf__ko_has(k, 7) ? k->in[7] : NULL;
    mm_shape s;
    WF__TRY(mm_plan(k, a, b, &s));
    WF__TRY(zp_vec(k, 2, s.M, "a_zero_point", &azp));
    WF__TRY(zp_vec(k, 5, s.N, "b_zero_point", &bzp));
    static const int si[3] = {1, 4, 6};
    double sc[3];
    for (int i = 0; i < 3; i++) {
        const wf_tensor *t = k->in[si[i]];
        if (t->size != 1)
            return wf__kctx_fail(k, WF_UNIMPLEMENTED, "scale input %d %s: only per-tensor scales are supported", si[i],
                                 wf__shape_str(t->rank, t->dims, b0));
        sc[i] = wf__load_f64(t->data, t->dtype, 0);
    }
    if (yzp && yzp->size != 1)
        return wf__kctx_fail(k, WF_UNIMPLEMENTED, "y_zero_point %s: only a per-tensor zero point is supported",
                             wf__shape_str(yzp->rank, yzp->dims, b0));
    wf_dtype st = k->in[1]->dtype, od = yzp ? yzp->dtype : a->dtype;
    /* the reference forms a_scale * b_scale / y_scale in the scales' dtype */
    double mult = wf__ko_round(wf__ko_round(sc[0] * sc[1], st) / sc[2], st);
    double z = yzp ? (double)wf__load_i64(yzp->data, yzp->dtype, 0) : 0.0;
    int64_t lo, hi;
    wf__ku_qrange(od, &lo, &hi);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, od, s.rank, s.dims, &y));
    int64_t *c;
    WF__TRY(alloc_i64(k, y->size, "QLinearMatMul's accumulators", &c));
    mm_run(a, b, azp, bzp, &s, c);
    for (int64_t i = 0; i < y->size; i++) {
        double v = rint((double)c[i] * mult + z);
        v = v < (double)lo ? (double)lo : v > (double)hi ? (double)hi : v;
        wf__store_f64(y->data, od, i, v);
    }
    wf__free(c);
    return NULL;
}

/* ---- integer convolution ------------------------------------------------------------------------------- */

typedef struct {
    wf__ku_iconv g;
    int rank;
    int64_t dims[WF_MAX_RANK];
} conv_plan;

static wf_status *conv_init(const wf__kctx *k, const wf_tensor *x, const wf_tensor *w, conv_plan *p)
{
    char b0[SB], b1[SB], err[3 * SB];
    p->rank = x->rank;
    if (!wf__ku_iconv_plan(x->rank, x->dims, wf__shape_str(x->rank, x->dims, b0), w->rank, w->dims,
                           wf__shape_str(w->rank, w->dims, b1), wf__attr_i(k->op, k->attrs, "group"),
                           wf__attr_get(k->op, k->attrs, "kernel_shape"), wf__attr_get(k->op, k->attrs, "strides"),
                           wf__attr_get(k->op, k->attrs, "dilations"), wf__attr_get(k->op, k->attrs, "pads"),
                           wf__attr_s(k->op, k->attrs, "auto_pad"), &p->g, p->dims, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    return NULL;
}

/* acc (N, M, out...) = conv(x - xzp, w - wzp[m]) (+ bias[m]); padding contributes zero. */
static void conv_run(const wf__ku_iconv *p, const wf_tensor *x, const wf_tensor *w, const wf_tensor *xzp,
                     const wf_tensor *wzp, const wf_tensor *bias, int64_t *acc)
{
    int64_t cg = p->C / p->G, mg = p->M / p->G, op = 1, kp = 1, ip = 1;
    for (int i = 0; i < p->ns; i++) {
        op *= p->out[i];
        kp *= p->k[i];
        ip *= p->in[i];
    }
    int64_t zx = zp_at(xzp, 0);
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t m = 0; m < p->M; m++) {
            int64_t g = m / mg, zw = zp_at(wzp, m);
            for (int64_t o = 0; o < op; o++) {
                int64_t oc[WF_MAX_RANK], r = o, sum = bias ? wf__load_i64(bias->data, bias->dtype, m) : 0;
                for (int i = p->ns - 1; i >= 0; i--) {
                    oc[i] = r % p->out[i];
                    r /= p->out[i];
                }
                for (int64_t kk = 0; kk < kp; kk++) {
                    int64_t rr = kk, off = 0, stride = 1;
                    bool inside = true;
                    for (int i = p->ns - 1; i >= 0; i--) {
                        int64_t c = oc[i] * p->s[i] - p->pb[i] + (rr % p->k[i]) * p->d[i];
                        rr /= p->k[i];
                        if (c < 0 || c >= p->in[i]) inside = false;
                        off += c * stride;
                        stride *= p->in[i];
                    }
                    if (!inside) continue;
                    for (int64_t c = 0; c < cg; c++) {
                        int64_t xv = wf__load_i64(x->data, x->dtype, (n * p->C + g * cg + c) * ip + off) - zx;
                        int64_t wv = wf__load_i64(w->data, w->dtype, (m * cg + c) * kp + kk) - zw;
                        sum += xv * wv;
                    }
                }
                acc[(n * p->M + m) * op + o] = sum;
            }
        }
}

wf_status *wf__k_conv_integer(wf__kctx *k)
{
    char b[SB];
    const wf_tensor *x = k->in[0], *w = k->in[1], *xzp = wf__ko_has(k, 2) ? k->in[2] : NULL, *wzp;
    conv_plan p;
    WF__TRY(conv_init(k, x, w, &p));
    if (xzp && xzp->size != 1)
        return wf__kctx_fail(k, WF_UNIMPLEMENTED, "x_zero_point %s: only a per-tensor zero point is supported",
                             wf__shape_str(xzp->rank, xzp->dims, b));
    WF__TRY(zp_vec(k, 3, p.g.M, "w_zero_point", &wzp));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, WF_I32, p.rank, p.dims, &y));
    int64_t *acc;
    WF__TRY(alloc_i64(k, y->size, "ConvInteger's accumulators", &acc));
    conv_run(&p.g, x, w, xzp, wzp, NULL, acc);
    for (int64_t i = 0; i < y->size; i++) ((int32_t *)y->data)[i] = (int32_t)acc[i];
    wf__free(acc);
    return NULL;
}

wf_status *wf__k_qlinear_conv(wf__kctx *k)
{
    char b[SB];
    const wf_tensor *x = k->in[0], *w = k->in[3], *xzp = wf__ko_has(k, 2) ? k->in[2] : NULL, *wzp;
    const wf_tensor *xs = k->in[1], *ws = k->in[4], *ys = k->in[6], *yzp = wf__ko_has(k, 7) ? k->in[7] : NULL;
    const wf_tensor *bias = wf__ko_has(k, 8) ? k->in[8] : NULL;
    conv_plan p;
    WF__TRY(conv_init(k, x, w, &p));
    if ((xzp && xzp->size != 1) || xs->size != 1 || ys->size != 1 || (yzp && yzp->size != 1))
        return wf__kctx_fail(k, WF_UNIMPLEMENTED, "x and y scales and zero points must be per tensor");
    WF__TRY(zp_vec(k, 5, p.g.M, "w_zero_point", &wzp));
    if (ws->size != 1 && !(ws->rank == 1 && ws->dims[0] == p.g.M))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "w_scale %s must be a scalar or have one value per output channel",
                             wf__shape_str(ws->rank, ws->dims, b));
    if (bias && (bias->rank != 1 || bias->dims[0] != p.g.M))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "B %s must have one value per output channel (%" PRId64 ")",
                             wf__shape_str(bias->rank, bias->dims, b), p.g.M);
    wf_dtype od = yzp ? yzp->dtype : x->dtype, st = xs->dtype;
    int64_t lo, hi;
    wf__ku_qrange(od, &lo, &hi);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, od, p.rank, p.dims, &y));
    int64_t *acc;
    WF__TRY(alloc_i64(k, y->size, "QLinearConv's accumulators", &acc));
    conv_run(&p.g, x, w, xzp, wzp, bias, acc);
    double xsv = wf__load_f64(xs->data, st, 0), ysv = wf__load_f64(ys->data, ys->dtype, 0);
    double z = yzp ? (double)wf__load_i64(yzp->data, yzp->dtype, 0) : 0.0;
    int64_t per = wf__numel(p.g.ns, p.g.out);
    for (int64_t i = 0; i < y->size; i++) {
        int64_t m = (i / per) % p.g.M;
        /* x_scale * w_scale / y_scale in the scales' dtype, as the reference forms it */
        double wsv = wf__load_f64(ws->data, ws->dtype, ws->size == 1 ? 0 : m);
        double mult = wf__ko_round(wf__ko_round(xsv * wsv, st) / ysv, st);
        double v = (double)acc[i] * mult + z;
        v = v < (double)lo ? (double)lo : v > (double)hi ? (double)hi : v;
        wf__store_f64(y->data, od, i, rint(v));
    }
    wf__free(acc);
    return NULL;
}
