/*
 * Device code of the CUDA backward ops of convolution and pooling and of the classification losses
 * (cuda_grad.c). Each mirrors the OpenCL kernel of the same name (src/backends/opencl/ocl_nngrad.c,
 * ocl_norm.c), which follows the CPU (k_nn_grad.c, k_onnx.c): sums in double, every kernel a gather so no
 * two threads write one element and no atomics are needed, and results independent of the launch shape.
 */
#include "cuda_dev.cuh"
#include "cuda_kern_ext.h"

namespace {

/* dx(n, c, ih, iw) gathers tap (a, b) of output (oh, ow) when ih = oh*SH - PH + a*DH exactly */
template <typename S> __global__ void k_conv_bp_input(const S *w, const S *dy, S *dx, cuk_conv g, int64_t n_out)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(gid, n_out) {
        int64_t iw = gid % g.w, t = gid / g.w, ih = t % g.h;
        t /= g.h;
        int64_t c = t % g.c, n = t / g.c, icg = g.c / g.g, ocg = g.oc / g.g, grp = c / icg, j = c % icg;
        double acc = 0;
        for (int64_t m = grp * ocg; m < (grp + 1) * ocg; m++) {
            const S *wp = w + (m * icg + j) * g.kh * g.kw, *dp = dy + (n * g.oc + m) * g.oh * g.ow;
            for (int64_t a = 0; a < g.kh; a++) {
                int64_t th = ih + g.ph - a * g.dh;
                if (th < 0 || th % g.sh) continue;
                int64_t oh = th / g.sh;
                if (oh >= g.oh) continue;
                for (int64_t b = 0; b < g.kw; b++) {
                    int64_t tw = iw + g.pw - b * g.dw;
                    if (tw < 0 || tw % g.sw) continue;
                    int64_t ow = tw / g.sw;
                    if (ow < g.ow) acc += (double)tr<S>::ld(wp, a * g.kw + b) * (double)tr<S>::ld(dp, oh * g.ow + ow);
                }
            }
        }
        tr<S>::st(dx, gid, (C)acc);
    }
}

/* One block per weight element (m, j, a, b): the block's threads split the n * oh * ow products. */
template <typename S> __global__ void k_conv_bp_filter(const S *x, const S *dy, S *dw, cuk_conv g, int64_t n_w)
{
    typedef typename tr<S>::C C;
    const int64_t icg = g.c / g.g, ocg = g.oc / g.g, per = g.oh * g.ow, total = g.n * per;
    for (int64_t gid = blockIdx.x; gid < n_w; gid += gridDim.x) {
        int64_t b = gid % g.kw, t = gid / g.kw, a = t % g.kh;
        t /= g.kh;
        int64_t j = t % icg, m = t / icg, c = (m / ocg) * icg + j;
        double acc = 0;
        for (int64_t r = threadIdx.x; r < total; r += blockDim.x) {
            int64_t n = r / per, q = r % per, oh = q / g.ow, ow = q % g.ow;
            int64_t ih = oh * g.sh - g.ph + a * g.dh, iw = ow * g.sw - g.pw + b * g.dw;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            acc += (double)tr<S>::ld(dy, (n * g.oc + m) * per + q) * (double)tr<S>::ld(x, ((n * g.c + c) * g.h + ih) * g.w + iw);
        }
        acc = block_reduce(acc, [](double u, double v) { return u + v; });
        if (threadIdx.x == 0) tr<S>::st(dw, gid, (C)acc);
    }
}

/* The tap of window (yh, yw) that MaxPool2D's loop selects: the first NaN, else the first strict maximum
 * in row-major order; a window of -inf only gives its first valid tap; -1 for none. */
template <typename S> __device__ int64_t max_tap(const S *xp, int64_t yh, int64_t yw, const cuk_conv &g)
{
    double acc = -INFINITY;
    int64_t arg = -1, first = -1;
    for (int64_t a = 0; a < g.kh; a++) {
        int64_t ih = yh * g.sh - g.ph + a * g.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t b = 0; b < g.kw; b++) {
            int64_t iw = yw * g.sw - g.pw + b * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            double v = (double)tr<S>::ld(xp, ih * g.w + iw);
            if (first < 0) first = ih * g.w + iw;
            if ((v > acc || v != v) && acc == acc) {
                acc = v;
                arg = ih * g.w + iw;
            }
        }
    }
    return arg < 0 ? first : arg;
}

/* dx(p, ih, iw) sums the windows that selected it (max) or that cover it, dy / divisor (avg); tap a of
 * window yh covers ih when ih = yh*SH - PH + a*DH, so each window is met once. */
template <typename S>
__global__ void k_pool_grad(const S *x, const S *dy, S *dx, cuk_conv g, int64_t peh, int64_t pew, int is_max,
                            int include_pad, int64_t n_out)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(gid, n_out) {
        int64_t iw = gid % g.w, t = gid / g.w, ih = t % g.h, p = t / g.h;
        const S *xp = is_max ? x + p * g.h * g.w : x, *dp = dy + p * g.oh * g.ow;
        double acc = 0;
        for (int64_t a = 0; a < g.kh; a++) {
            int64_t th = ih + g.ph - a * g.dh;
            if (th < 0 || th % g.sh) continue;
            int64_t yh = th / g.sh;
            if (yh >= g.oh) continue;
            for (int64_t b = 0; b < g.kw; b++) {
                int64_t tw = iw + g.pw - b * g.dw;
                if (tw < 0 || tw % g.sw) continue;
                int64_t yw = tw / g.sw;
                if (yw >= g.ow) continue;
                if (is_max) {
                    if (max_tap(xp, yh, yw, g) == ih * g.w + iw) acc += (double)tr<S>::ld(dp, yh * g.ow + yw);
                    continue;
                }
                int64_t n_valid = 0, n_pad = 0;
                for (int64_t a2 = 0; a2 < g.kh; a2++) {
                    int64_t r = yh * g.sh - g.ph + a2 * g.dh;
                    if (r < -g.ph || r >= g.h + peh) continue;
                    for (int64_t b2 = 0; b2 < g.kw; b2++) {
                        int64_t q = yw * g.sw - g.pw + b2 * g.dw;
                        if (q < -g.pw || q >= g.w + pew) continue;
                        n_pad++;
                        n_valid += r >= 0 && r < g.h && q >= 0 && q < g.w;
                    }
                }
                int64_t div = include_pad ? n_pad : n_valid;
                if (div) acc += (double)tr<S>::ld(dp, yh * g.ow + yw) / (double)div;
            }
        }
        tr<S>::st(dx, gid, (C)acc);
    }
}

template <typename S> __global__ void k_gap_grad(const S *dy, S *dx, int64_t n, int64_t inner)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(i, n) { tr<S>::st(dx, i, (C)((double)tr<S>::ld(dy, i / inner) / (double)inner)); }
}

/* v rounded to the storage type and back: the CPU rounds the log-probabilities and each loss term. */
template <typename S> __device__ __forceinline__ double rnd(double v)
{
    S t;
    tr<S>::st(&t, 0, (typename tr<S>::C)v);
    return (double)tr<S>::ld(&t, 0);
}

/* log-softmax over C of each (n, d), written to lp */
template <typename S> __global__ void k_logsm(const S *x, S *lp, int64_t ND, int64_t C, int64_t D)
{
    typedef typename tr<S>::C CT;
    GRID_LOOP(g, ND) {
        int64_t base = (g / D) * C * D + g % D;
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < C; c++) {
            double v = (double)tr<S>::ld(x, base + c * D);
            m = v > m || v != v ? v : m;
        }
        for (int64_t c = 0; c < C; c++) s += exp((double)tr<S>::ld(x, base + c * D) - m);
        double ls = log(s);
        for (int64_t c = 0; c < C; c++) tr<S>::st(lp, base + c * D, (CT)((double)tr<S>::ld(x, base + c * D) - m - ls));
    }
}

/* Each (n, d)'s loss -lp[n, t, d] * w[t], rounded to the storage type; with a reduction, one block sums
 * them (and their weights) and writes y[0]. lp_given: lp holds the log-probabilities already; else,
 * softmax: they are computed here for the target class only; neither: x holds them (NLL). */
template <typename S>
__global__ void k_nll(const S *x, const S *lp, int lp_given, int softmax, const void *tgt, int t64, const S *w,
                      int has_ign, int64_t ign, S *y, int red, int64_t ND, int64_t C, int64_t D, cuk_err *err,
                      unsigned long long site)
{
    typedef typename tr<S>::C CT;
    double sum = 0, wsum = 0;
    GRID_LOOP(i, ND) {
        int64_t n = i / D, d = i % D;
        int64_t tv = t64 ? ((const int64_t *)tgt)[i] : (int64_t)((const int32_t *)tgt)[i];
        double l = 0, wt = 0;
        if (!(has_ign && tv == ign) && (tv < 0 || tv >= C)) cuk_flag(err, site, tv, i, C);
        if (!(has_ign && tv == ign) && tv >= 0 && tv < C) {
            int64_t base = n * C * D + d;
            double lpt;
            if (lp_given || !softmax) {
                lpt = (double)tr<S>::ld(lp_given ? lp : x, base + tv * D);
            } else {
                double m = -INFINITY, s = 0;
                for (int64_t c = 0; c < C; c++) {
                    double v = (double)tr<S>::ld(x, base + c * D);
                    m = v > m || v != v ? v : m;
                }
                for (int64_t c = 0; c < C; c++) s += exp((double)tr<S>::ld(x, base + c * D) - m);
                lpt = rnd<S>((double)tr<S>::ld(x, base + tv * D) - m - log(s));
            }
            wt = w ? (double)tr<S>::ld(w, tv) : 1.0;
            l = rnd<S>(-lpt * wt);
        }
        if (red) {
            sum += l;
            wsum += wt;
        } else {
            tr<S>::st(y, i, (CT)l);
        }
    }
    if (!red) return;
    sum = block_reduce(sum, [](double u, double v) { return u + v; });
    wsum = block_reduce(wsum, [](double u, double v) { return u + v; });
    if (threadIdx.x == 0) tr<S>::st(y, 0, (CT)(red == 2 ? sum / wsum : sum));
}

unsigned grid_cap(int64_t n) { return (unsigned)(n < 1 ? 1 : n < (1 << 20) ? n : (1 << 20)); }

} // namespace

extern "C" {

int cuk_conv_bp_input(cudaStream_t s, int dtype, const void *w, const void *dy, void *dx, const cuk_conv *g)
{
    int64_t n = g->n * g->c * g->h * g->w;
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_conv_bp_input<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)w, (const T *)dy, (T *)dx, *g, n)));
    return last_error();
}

int cuk_conv_bp_filter(cudaStream_t s, int dtype, const void *x, const void *dy, void *dw, const cuk_conv *g)
{
    int64_t n = g->oc * (g->c / g->g) * g->kh * g->kw;
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_conv_bp_filter<T><<<grid_cap(n), THREADS, 0, s>>>((const T *)x, (const T *)dy, (T *)dw, *g, n)));
    return last_error();
}

int cuk_pool_grad(cudaStream_t s, int dtype, const void *x, const void *dy, void *dx, const cuk_conv *g, int64_t pe_h,
                  int64_t pe_w, int is_max, int include_pad)
{
    int64_t n = g->n * g->c * g->h * g->w;
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_pool_grad<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (const T *)dy, (T *)dx, *g, pe_h,
                                                                           pe_w, is_max, include_pad, n)));
    return last_error();
}

int cuk_gap_grad(cudaStream_t s, int dtype, const void *dy, void *dx, int64_t n, int64_t inner)
{
    if (n <= 0 || inner <= 0) return 0;
    DISPATCH_FLT(dtype, (k_gap_grad<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)dy, (T *)dx, n, inner)));
    return last_error();
}

int cuk_class_loss(cudaStream_t s, int dtype, int softmax, const void *x, const void *tgt, int t64, const void *w,
                   int has_ign, int64_t ign, void *lp, void *y, int reduction, int64_t N, int64_t C, int64_t D,
                   cuk_err *err, unsigned long long site)
{
    int64_t ND = N * D;
    if (softmax && lp && ND > 0 && C > 0) {
        DISPATCH_FLT(dtype, (k_logsm<T><<<blocks_for(ND), THREADS, 0, s>>>((const T *)x, (T *)lp, ND, C, D)));
        int rc = last_error();
        if (rc) return rc;
    }
    if (!reduction && ND <= 0) return 0;
    /* a reduction runs in one block, so that its sum has one order whatever the device */
    unsigned grid = reduction ? 1 : blocks_for(ND);
    DISPATCH_FLT(dtype, (k_nll<T><<<grid, THREADS, 0, s>>>((const T *)x, (const T *)lp, softmax && lp != NULL, softmax, tgt,
                                                           t64, (const T *)w, has_ign, ign, (T *)y, reduction, ND, C,
                                                           D > 0 ? D : 1, err, site)));
    return last_error();
}

} // extern "C"
