/*
 * CPU kernels of ops_rnn_image.c that sample or scatter images: GridSample (1 to 3 spatial dims), AffineGrid,
 * RoiAlign, Col2Im and MaxUnpool. Coordinates follow the ONNX reference implementation, including its
 * choices at the borders, since the conformance data is generated from it.
 */
#include "backends/cpu/k_rnn_image.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define SB WF__KO2_SB
#define MAXSP 3 /* spatial dims GridSample and AffineGrid handle */

/* ---- GridSample --------------------------------------------------------------------------------- */

enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECT };

/* Folds x into [lo, hi] by reflecting at the borders as many times as needed. */
static double reflect(double x, double lo, double hi)
{
    double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
        double dx = lo - x;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - (double)n * rng;
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - (double)n * rng;
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

typedef struct gs {
    int nsp, pad;
    const int64_t *dims;   /* spatial dims */
    const int64_t *stride; /* element strides of the spatial dims */
    double lo[MAXSP], hi[MAXSP];
} gs;

/* The input value at integer position idx of one (n, c) plane with the padding rule applied. */
static double gs_pixel(const gs *g, const double *plane, const int64_t *idx)
{
    int64_t off = 0;
    for (int i = 0; i < g->nsp; i++) {
        int64_t v = idx[i], d = g->dims[i];
        if (v < 0 || v >= d) {
            if (g->pad == PAD_ZEROS) return 0;
            if (g->pad == PAD_REFLECT) v = (int64_t)reflect((double)v, g->lo[i], g->hi[i]);
            v = v < 0 ? 0 : v >= d ? d - 1 : v;
        }
        off += v * g->stride[i];
    }
    return plane[off];
}

static void cubic_coeffs(double t, double *w)
{
    const double a = -0.75;
    double x = t + 1;
    w[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    x = t;
    w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 1 - t;
    w[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 2 - t;
    w[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

wf_status *wf__k_grid_sample(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *G = k->in[1];
    char b0[SB], b1[SB];
    int nsp = X->rank - 2;
    if (nsp < 1 || nsp > MAXSP || G->rank != X->rank || G->dims[0] != X->dims[0] || G->dims[G->rank - 1] != nsp)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "grid %s must be [N, out spatial..., %d] for X %s (1 to 3 spatial dims)",
                             wf__shape_str(G->rank, G->dims, b1), nsp, wf__shape_str(X->rank, X->dims, b0));
    const char *mode = wf__attr_s(k->op, k->attrs, "mode"), *pad = wf__attr_s(k->op, k->attrs, "padding_mode");
    int md = !strcmp(mode, "nearest") ? 0 : (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) ? 2 : 1;
    bool ac = wf__attr_i(k->op, k->attrs, "align_corners") != 0;
    gs g = {.nsp = nsp, .dims = X->dims + 2};
    g.pad = !strcmp(pad, "border") ? PAD_BORDER : !strcmp(pad, "reflection") ? PAD_REFLECT : PAD_ZEROS;
    int64_t stride[MAXSP], plane = 1;
    for (int i = nsp - 1; i >= 0; i--) stride[i] = plane, plane *= g.dims[i];
    g.stride = stride;
    for (int i = 0; i < nsp; i++) {
        g.lo[i] = ac ? 0.0 : -0.5;
        g.hi[i] = ac ? (double)g.dims[i] - 1 : (double)g.dims[i] - 0.5;
    }
    int64_t N = X->dims[0], C = X->dims[1], npts = wf__numel(nsp, G->dims + 1);
    int64_t odims[WF_MAX_RANK] = {N, C};
    for (int i = 0; i < nsp; i++) odims[2 + i] = G->dims[1 + i];
    double *x = NULL, *gr = NULL, *y = NULL;
    wf_status *s;
    if ((s = wf__ko2_widen(k, X, &x)) || (s = wf__ko2_widen(k, G, &gr)) ||
        (s = wf__ko2_zeros(k, N * C * npts, "the output", &y)))
        goto done;
    /* The reference denormalises in the grid's precision; f32 arithmetic keeps nearest's ties the same. */
    bool single = G->dtype != WF_F64;
    int taps = md == 0 ? 1 : md == 1 ? 2 : 4, ncorner = 1;
    for (int i = 0; i < nsp; i++) ncorner *= taps;
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < npts; p++) {
            const double *gp = gr + (n * npts + p) * nsp;
            double pos[MAXSP], w[MAXSP][4];
            int64_t base[MAXSP];
            for (int i = 0; i < nsp; i++) {
                double v = gp[nsp - 1 - i], len = (double)g.dims[i], c;
                if (single) {
                    float f = (float)v;
                    c = ac ? (double)((f + 1.0f) / 2.0f * (float)(len - 1)) : (double)(((f + 1.0f) * (float)len - 1.0f) / 2.0f);
                } else {
                    c = ac ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2;
                }
                if (md == 0) c = nearbyint(c);
                if (c < g.lo[i] || c > g.hi[i]) {
                    if (g.pad == PAD_BORDER) c = c < 0 ? 0 : c > len - 1 ? len - 1 : c;
                    else if (g.pad == PAD_REFLECT) c = reflect(c, g.lo[i], g.hi[i]);
                }
                pos[i] = c;
                if (md == 0) {
                    base[i] = (int64_t)c;
                    w[i][0] = 1;
                } else {
                    double f = floor(c), t = c - f;
                    base[i] = (int64_t)f - (md == 2 ? 1 : 0);
                    if (md == 1) w[i][0] = 1 - t, w[i][1] = t;
                    else cubic_coeffs(t, w[i]);
                }
            }
            (void)pos;
            for (int64_t ch = 0; ch < C; ch++) {
                const double *pl = x + (n * C + ch) * plane;
                double acc = 0;
                for (int cn = 0; cn < ncorner; cn++) {
                    int64_t idx[MAXSP];
                    double wt = 1;
                    int q = cn;
                    for (int i = nsp - 1; i >= 0; i--) {
                        int o = q % taps;
                        q /= taps;
                        idx[i] = base[i] + o;
                        wt *= w[i][o];
                    }
                    if (wt != 0) acc += wt * gs_pixel(&g, pl, idx);
                }
                y[(n * C + ch) * npts + p] = acc;
            }
        }
    s = wf__ko2_emit(k, 0, X->dtype, X->rank, odims, y);
done:
    wf__free(x), wf__free(gr), wf__free(y);
    return s;
}

/* ---- AffineGrid ------------------------------------------------------------------------------- */

wf_status *wf__k_affine_grid(wf__kctx *k)
{
    const wf_tensor *T = k->in[0];
    char b[SB];
    int64_t sz[5];
    int n = 0;
    WF__TRY(wf__ko2_ints(k, 1, "size", sz, 5, &n));
    int nsp = n - 2;
    if ((nsp != 2 && nsp != 3) || T->rank != 3 || T->dims[0] != sz[0] || T->dims[1] != nsp || T->dims[2] != nsp + 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "theta %s must be [N, 2, 3] with a size of 4 values or [N, 3, 4] with 5 (got %d)",
                             wf__shape_str(T->rank, T->dims, b), n);
    for (int i = 0; i < n; i++)
        if (sz[i] < 0) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "size holds a negative value %" PRId64, sz[i]);
    bool ac = wf__attr_i(k->op, k->attrs, "align_corners") != 0;
    int64_t odims[5] = {sz[0]}, npts = 1;
    for (int i = 0; i < nsp; i++) odims[1 + i] = sz[2 + i], npts *= sz[2 + i];
    odims[nsp + 1] = nsp;
    double *th = NULL, *y = NULL;
    wf_status *s;
    if ((s = wf__ko2_widen(k, T, &th)) || (s = wf__ko2_zeros(k, sz[0] * npts * nsp, "the grid", &y))) goto done;
    for (int64_t bn = 0; bn < sz[0]; bn++) {
        const double *t = th + bn * nsp * (nsp + 1);
        for (int64_t p = 0; p < npts; p++) {
            /* homogeneous point (x, y[, z], 1): x runs over the last spatial dim */
            double h[4];
            int64_t q = p;
            for (int i = nsp - 1; i >= 0; i--) {
                int64_t len = sz[2 + i], v = q % len;
                q /= len;
                double c = ac ? (len > 1 ? -1.0 + 2.0 * (double)v / (double)(len - 1) : -1.0)
                              : -1.0 + (2.0 * (double)v + 1.0) / (double)len;
                h[nsp - 1 - i] = c;
            }
            h[nsp] = 1;
            for (int r = 0; r < nsp; r++) {
                double acc = 0;
                for (int j = 0; j <= nsp; j++) acc += t[r * (nsp + 1) + j] * h[j];
                y[(bn * npts + p) * nsp + r] = acc;
            }
        }
    }
    s = wf__ko2_emit(k, 0, T->dtype, nsp + 2, odims, y);
done:
    wf__free(th), wf__free(y);
    return s;
}

/* ---- RoiAlign ----------------------------------------------------------------------------------- */

wf_status *wf__k_roi_align(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *rois = k->in[1], *bi = k->in[2];
    char b0[SB], b1[SB];
    if (X->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, rois %s and batch_indices must be [N,C,H,W], [R,4] and [R]",
                             wf__shape_str(X->rank, X->dims, b0), wf__shape_str(rois->rank, rois->dims, b1));
    int64_t N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3], R = rois->dims[0];
    int64_t oh = wf__attr_i(k->op, k->attrs, "output_height"), ow = wf__attr_i(k->op, k->attrs, "output_width");
    int64_t sr = wf__attr_i(k->op, k->attrs, "sampling_ratio");
    double scale = wf__attr_f(k->op, k->attrs, "spatial_scale");
    bool half = !strcmp(wf__attr_s(k->op, k->attrs, "coordinate_transformation_mode"), "half_pixel");
    bool is_max = !strcmp(wf__attr_s(k->op, k->attrs, "mode"), "max");
    for (int64_t r = 0; r < R; r++) {
        int64_t v = wf__load_i64(bi->data, bi->dtype, r);
        if (v < 0 || v >= N)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "batch_indices[%" PRId64 "] = %" PRId64 " is outside [0, %" PRId64 ")",
                                 r, v, N);
    }
    int64_t odims[4] = {R, C, oh, ow};
    double *x = NULL, *ro = NULL, *y = NULL;
    wf_status *s;
    if ((s = wf__ko2_widen(k, X, &x)) || (s = wf__ko2_widen(k, rois, &ro)) ||
        (s = wf__ko2_zeros(k, R * C * oh * ow, "the output", &y)))
        goto done;
    for (int64_t r = 0; r < R; r++) {
        int64_t bn = wf__load_i64(bi->data, bi->dtype, r);
        double off = half ? 0.5 : 0.0;
        double x0 = ro[r * 4] * scale - off, y0 = ro[r * 4 + 1] * scale - off;
        double rw = ro[r * 4 + 2] * scale - off - x0, rh = ro[r * 4 + 3] * scale - off - y0;
        if (!half) rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
        double bh = rh / (double)oh, bw = rw / (double)ow;
        int64_t gh = sr > 0 ? sr : (int64_t)ceil(rh / (double)oh), gw = sr > 0 ? sr : (int64_t)ceil(rw / (double)ow);
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t c = 0; c < C; c++) {
            const double *pl = x + (bn * C + c) * H * W;
            for (int64_t ph = 0; ph < oh; ph++)
                for (int64_t pw = 0; pw < ow; pw++) {
                    double acc = 0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double yy = y0 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = x0 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double v[4] = {0, 0, 0, 0};
                            if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
                                yy = yy > 0 ? yy : 0;
                                xx = xx > 0 ? xx : 0;
                                int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                                if (yl >= H - 1) yh = yl = H - 1, yy = (double)yl;
                                else yh = yl + 1;
                                if (xl >= W - 1) xh = xl = W - 1, xx = (double)xl;
                                else xh = xl + 1;
                                double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                                v[0] = hy * hx * pl[yl * W + xl], v[1] = hy * lx * pl[yl * W + xh];
                                v[2] = ly * hx * pl[yh * W + xl], v[3] = ly * lx * pl[yh * W + xh];
                            }
                            if (is_max) {
                                /* max over the four weighted corners, as the reference does */
                                double m = v[0];
                                for (int q = 1; q < 4; q++) m = v[q] > m ? v[q] : m;
                                acc = first || m > acc ? m : acc;
                            } else {
                                acc += v[0] + v[1] + v[2] + v[3];
                            }
                            first = false;
                        }
                    y[((r * C + c) * oh + ph) * ow + pw] = is_max ? acc : acc / count;
                }
        }
    }
    s = wf__ko2_emit(k, 0, X->dtype, 4, odims, y);
done:
    wf__free(x), wf__free(ro), wf__free(y);
    return s;
}

/* ---- Col2Im ------------------------------------------------------------------------------------- */

wf_status *wf__k_col2im(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    char b[SB];
    int64_t img[WF_MAX_RANK], blk[WF_MAX_RANK];
    int ni = 0, nb = 0;
    WF__TRY(wf__ko2_ints(k, 1, "image_shape", img, WF_MAX_RANK - 2, &ni));
    WF__TRY(wf__ko2_ints(k, 2, "block_shape", blk, WF_MAX_RANK - 2, &nb));
    const wf__attr *da = wf__attr_get(k->op, k->attrs, "dilations"), *pa = wf__attr_get(k->op, k->attrs, "pads"),
                   *sa = wf__attr_get(k->op, k->attrs, "strides");
    int n = ni;
    if (ni != nb || ni < 1 || (da->n && da->n != n) || (sa->n && sa->n != n) || (pa->n && pa->n != 2 * n))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                             "image_shape (%d values), block_shape (%d), dilations (%d), strides (%d) and pads (%d) disagree",
                             ni, nb, da->n, sa->n, pa->n);
    int64_t bsz = 1, nblk[WF_MAX_RANK], L = 1;
    for (int i = 0; i < n; i++) {
        int64_t d = da->n ? da->ints[i] : 1, st = sa->n ? sa->ints[i] : 1;
        int64_t p = pa->n ? pa->ints[i] + pa->ints[n + i] : 0;
        if (blk[i] < 1 || d < 1 || st < 1 || img[i] < 0)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "block_shape, dilations and strides must be positive");
        nblk[i] = (img[i] + p - d * (blk[i] - 1) - 1) / st + 1;
        bsz *= blk[i];
        L *= nblk[i];
    }
    if (X->rank != 3 || X->dims[1] % bsz || X->dims[2] != L)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT,
                             "input %s must be [N, C * %" PRId64 ", %" PRId64 "] for these image and block shapes",
                             wf__shape_str(X->rank, X->dims, b), bsz, L);
    int64_t N = X->dims[0], C = X->dims[1] / bsz, odims[WF_MAX_RANK] = {N, C}, isz = 1;
    for (int i = 0; i < n; i++) odims[2 + i] = img[i], isz *= img[i];
    double *x = NULL, *y = NULL;
    wf_status *s;
    if ((s = wf__ko2_widen(k, X, &x)) || (s = wf__ko2_zeros(k, N * C * isz, "the image", &y))) goto done;
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t kb = 0; kb < bsz; kb++)
            for (int64_t l = 0; l < L; l++) {
                /* kernel offset kb and block l, both row-major over the spatial dims */
                int64_t q = kb, ql = l, off = 0;
                bool in = true;
                int64_t kof[WF_MAX_RANK], lof[WF_MAX_RANK];
                for (int i = n - 1; i >= 0; i--) kof[i] = q % blk[i], q /= blk[i], lof[i] = ql % nblk[i], ql /= nblk[i];
                for (int i = 0; i < n && in; i++) {
                    int64_t pos = lof[i] * (sa->n ? sa->ints[i] : 1) - (pa->n ? pa->ints[i] : 0) +
                                  kof[i] * (da->n ? da->ints[i] : 1);
                    in = pos >= 0 && pos < img[i];
                    off = off * img[i] + pos;
                }
                if (in) y[nc * isz + off] += x[(nc * bsz + kb) * L + l];
            }
    s = wf__ko2_emit(k, 0, X->dtype, n + 2, odims, y);
done:
    wf__free(x), wf__free(y);
    return s;
}

/* ---- MaxUnpool ---------------------------------------------------------------------------------- */

/*
 * Indices address the unpooled tensor of the default shape ((in - 1) * stride + kernel - pads). With
 * output_shape, that tensor sits at the start of each axis of the larger output, as the ONNX reference
 * and its test data have it.
 */
wf_status *wf__k_max_unpool(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *I = k->in[1];
    char b0[SB], b1[SB];
    const wf__attr *ks = wf__attr_get(k->op, k->attrs, "kernel_shape"), *st = wf__attr_get(k->op, k->attrs, "strides"),
                   *pd = wf__attr_get(k->op, k->attrs, "pads");
    int nsp = ks->n, rank = nsp + 2;
    if (X->rank != rank || I->rank != rank || memcmp(X->dims, I->dims, sizeof(int64_t) * (size_t)rank) ||
        (I->dtype != WF_I64 && I->dtype != WF_I32))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s and indices %s must have one shape of rank %d (indices i32 or i64)",
                             wf__shape_str(X->rank, X->dims, b0), wf__shape_str(I->rank, I->dims, b1), rank);
    int64_t inf[WF_MAX_RANK] = {X->dims[0], X->dims[1]}, out[WF_MAX_RANK];
    for (int i = 0; i < nsp; i++)
        inf[2 + i] = (X->dims[2 + i] - 1) * (st->n ? st->ints[i] : 1) + ks->ints[i] -
                     (pd->n ? pd->ints[i] + pd->ints[nsp + i] : 0);
    memcpy(out, inf, sizeof inf);
    if (wf__ko2_has(k, 2)) {
        int n = 0;
        WF__TRY(wf__ko2_ints(k, 2, "output_shape", out, WF_MAX_RANK, &n));
        bool ok = n == rank;
        for (int i = 0; ok && i < rank; i++) ok = out[i] >= inf[i] && (i >= 2 || out[i] == inf[i]);
        if (!ok)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "output_shape %s must have rank %d and hold the unpooled shape %s",
                                 wf__shape_str(n, out, b0), rank, wf__shape_str(rank, inf, b1));
    }
    int64_t total = wf__numel(rank, inf);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, X->dtype, rank, out, &y));
    memset(y->data, 0, y->bytes);
    size_t es = wf_dtype_size(X->dtype);
    int64_t ostr[WF_MAX_RANK], istr[WF_MAX_RANK];
    wf__strides(rank, out, ostr);
    wf__strides(rank, inf, istr);
    for (int64_t e = 0; e < X->size; e++) {
        int64_t ix = wf__load_i64(I->data, I->dtype, e);
        if (ix < 0 || ix >= total)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "index %" PRId64 " is outside the %" PRId64 " unpooled elements", ix,
                                 total);
        int64_t off = 0;
        for (int i = 0; i < rank; i++) off += (ix / istr[i]) % inf[i] * ostr[i];
        memcpy((char *)y->data + (size_t)off * es, (const char *)X->data + (size_t)e * es, es);
    }
    return NULL;
}
