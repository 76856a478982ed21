/*
 * Device code of the CUDA resampling, signal and contraction ops (cuda_image.c). Ports of the CPU
 * kernels (src/backends/cpu/k_misc_resize.c, k_image_sample.c, k_signal_misc.c, k_onnx.c,
 * k_misc_einsum.c): arithmetic in double, every product through a round-to-nearest intrinsic so that
 * nvcc never contracts it into an FMA (the CPU rounds each step, and nearest-neighbour ties, truncation
 * to integers and border tests depend on the last bit).
 */
#include "cuda_dev.cuh"
#include "cuda_image.h"

namespace {

__device__ __forceinline__ double M(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float Mf(float a, float b) { return __fmul_rn(a, b); }

/* ---- Resize ---------------------------------------------------------------------------------------------- */

template <typename T> __global__ void k_widen(const T *x, double *y, int64_t n)
{
    GRID_LOOP(i, n) y[i] = ld_d(x, i);
}

template <typename T> __global__ void k_narrow(const double *x, T *y, int64_t n)
{
    GRID_LOOP(i, n) st_d(y, i, x[i]);
}

__global__ void k_rs_pass(const double *src, double *dst, const int64_t *idx, const double *w, const uint8_t *ext,
                          int64_t in_len, int64_t out_len, int64_t inner, int n, double extrap, int64_t total)
{
    GRID_LOOP(g, total) {
        int64_t i = g % inner, q = g / inner, o = q / out_len, p = q % out_len;
        if (ext[p]) {
            dst[g] = extrap;
            continue;
        }
        double acc = 0;
        for (int t = 0; t < n; t++) {
            double wt = w[p * n + t];
            if (wt == 0) continue;
            acc = __dadd_rn(acc, M(wt, src[(o * in_len + idx[p * n + t]) * inner + i]));
        }
        dst[g] = acc;
    }
}

/* ---- GridSample, AffineGrid ------------------------------------------------------------------------------- */

__device__ double gs_reflect(double x, double lo, double hi)
{
    double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
        double dx = lo - x;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - M((double)n, rng);
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi;
        int64_t n = (int64_t)(dx / rng);
        double r = dx - M((double)n, rng);
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

/* ((a x - 5a) x + 8a) x - 4a and ((a + 2) x - (a + 3)) x x + 1, each step rounded */
__device__ __forceinline__ double cub_far(double x, double a)
{
    return M(M(M(a, x) - M(5, a), x) + M(8, a), x) - M(4, a);
}
__device__ __forceinline__ double cub_near(double x, double a) { return M(M(M(a + 2, x) - (a + 3), x), x) + 1; }

template <typename T> __global__ void k_grid_sample(const T *x, const double *gr, T *y, int64_t total, cuki_gs G)
{
    int nsp = G.nsp;
    int64_t st[3], plane = 1;
    for (int i = nsp - 1; i >= 0; i--) {
        st[i] = plane;
        plane *= G.dims[i];
    }
    int taps = G.mode == 0 ? 1 : G.mode == 1 ? 2 : 4, ncorner = 1;
    for (int i = 0; i < nsp; i++) ncorner *= taps;
    GRID_LOOP(g, total) {
        int64_t p = g % G.npts, nc = g / G.npts, n = nc / G.C;
        int64_t base[3];
        double lo[3], hi[3], w[3][4];
        const double *gp = gr + (n * G.npts + p) * nsp;
        for (int i = 0; i < nsp; i++) {
            double v = gp[nsp - 1 - i], len = (double)G.dims[i], c;
            lo[i] = G.ac ? 0.0 : -0.5;
            hi[i] = G.ac ? len - 1 : len - 0.5;
            if (G.single) {
                float f = (float)v;
                c = G.ac ? (double)Mf((f + 1.0f) / 2.0f, (float)(len - 1))
                         : (double)((Mf(f + 1.0f, (float)len) - 1.0f) / 2.0f);
            } else {
                c = G.ac ? M((v + 1) / 2, len - 1) : (M(v + 1, len) - 1) / 2;
            }
            if (G.mode == 0) c = rint(c);
            if (c < lo[i] || c > hi[i]) {
                if (G.pad == 1) c = c < 0 ? 0.0 : c > len - 1 ? len - 1 : c;
                else if (G.pad == 2) c = gs_reflect(c, lo[i], hi[i]);
            }
            if (G.mode == 0) {
                base[i] = (int64_t)c;
                w[i][0] = 1;
            } else {
                double f = floor(c), t = c - f;
                base[i] = (int64_t)f - (G.mode == 2 ? 1 : 0);
                if (G.mode == 1) {
                    w[i][0] = 1 - t;
                    w[i][1] = t;
                } else {
                    const double a = -0.75;
                    w[i][0] = cub_far(t + 1, a);
                    w[i][1] = cub_near(t, a);
                    w[i][2] = cub_near(1 - t, a);
                    w[i][3] = cub_far(2 - t, a);
                }
            }
        }
        const T *pl = x + nc * plane;
        double acc = 0;
        for (int cn = 0; cn < ncorner; cn++) {
            double wt = 1;
            int q = cn;
            int64_t off = 0;
            bool zero = false;
            for (int i = nsp - 1; i >= 0; i--) {
                int o = q % taps;
                q /= taps;
                int64_t v = base[i] + o, d = G.dims[i];
                wt = M(wt, w[i][o]);
                if (v < 0 || v >= d) {
                    if (G.pad == 0) zero = true;
                    if (G.pad == 2) v = (int64_t)gs_reflect((double)v, lo[i], hi[i]);
                    v = v < 0 ? 0 : v >= d ? d - 1 : v;
                }
                off += v * st[i];
            }
            if (wt != 0) acc = __dadd_rn(acc, M(wt, zero ? 0.0 : ld_d(pl, off)));
        }
        st_d(y, g, acc);
    }
}

template <typename T>
__global__ void k_affine_grid(const T *th, T *y, int64_t total, int64_t npts, int nsp, int64_t s0, int64_t s1,
                              int64_t s2, int ac)
{
    GRID_LOOP(g, total) {
        int64_t r = g % nsp, pt = g / nsp, p = pt % npts, bn = pt / npts;
        int64_t sz[3] = {s0, s1, s2}, q = p;
        double h[4];
        for (int i = nsp - 1; i >= 0; i--) {
            int64_t len = sz[i], v = q % len;
            q /= len;
            h[nsp - 1 - i] = ac ? (len > 1 ? -1.0 + M(2.0, (double)v) / (double)(len - 1) : -1.0)
                                : -1.0 + (M(2.0, (double)v) + 1.0) / (double)len;
        }
        h[nsp] = 1;
        const T *t = th + bn * nsp * (nsp + 1) + r * (nsp + 1);
        double acc = 0;
        for (int j = 0; j <= nsp; j++) acc = __dadd_rn(acc, M(ld_d(t, j), h[j]));
        st_d(y, g, acc);
    }
}

/* ---- RoiAlign ----------------------------------------------------------------------------------------------- */

template <typename T>
__global__ void k_roi_align(const T *x, const T *ro, const void *bi, int bi64, T *y, int64_t total, cuki_roi P)
{
    GRID_LOOP(g, total) {
        int64_t pw = g % P.ow, t = g / P.ow, ph = t % P.oh;
        t /= P.oh;
        int64_t c = t % P.C, r = t / P.C, H = P.H, W = P.W;
        int64_t bn = bi64 ? ((const int64_t *)bi)[r] : (int64_t)((const int32_t *)bi)[r];
        bn = bn < 0 ? 0 : bn >= P.N ? P.N - 1 : bn; /* a bad one is reported by the caller's check */
        double off = P.half ? 0.5 : 0.0;
        double x0 = M(ld_d(ro, r * 4), P.scale) - off, y0 = M(ld_d(ro, r * 4 + 1), P.scale) - off;
        double rw = M(ld_d(ro, r * 4 + 2), P.scale) - off - x0, rh = M(ld_d(ro, r * 4 + 3), P.scale) - off - y0;
        if (!P.half) {
            rw = rw > 1 ? rw : 1.0;
            rh = rh > 1 ? rh : 1.0;
        }
        double bh = rh / (double)P.oh, bw = rw / (double)P.ow;
        int64_t gh = P.sr > 0 ? P.sr : (int64_t)ceil(rh / (double)P.oh),
                gw = P.sr > 0 ? P.sr : (int64_t)ceil(rw / (double)P.ow);
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        const T *pl = x + (bn * P.C + c) * H * W;
        double acc = 0;
        bool first = true;
        for (int64_t iy = 0; iy < gh; iy++)
            for (int64_t ix = 0; ix < gw; ix++) {
                double yy = y0 + M((double)ph, bh) + M((double)iy + 0.5, bh) / (double)gh;
                double xx = x0 + M((double)pw, bw) + M((double)ix + 0.5, bw) / (double)gw;
                double v[4] = {0, 0, 0, 0};
                if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
                    yy = yy > 0 ? yy : 0.0;
                    xx = xx > 0 ? xx : 0.0;
                    int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
                    if (yl >= H - 1) {
                        yh = yl = H - 1;
                        yy = (double)yl;
                    } else {
                        yh = yl + 1;
                    }
                    if (xl >= W - 1) {
                        xh = xl = W - 1;
                        xx = (double)xl;
                    } else {
                        xh = xl + 1;
                    }
                    double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
                    v[0] = M(M(hy, hx), ld_d(pl, yl * W + xl));
                    v[1] = M(M(hy, lx), ld_d(pl, yl * W + xh));
                    v[2] = M(M(ly, hx), ld_d(pl, yh * W + xl));
                    v[3] = M(M(ly, lx), ld_d(pl, yh * W + xh));
                }
                if (P.is_max) {
                    double m = v[0];
                    for (int q = 1; q < 4; q++) m = v[q] > m ? v[q] : m;
                    acc = first || m > acc ? m : acc;
                } else {
                    acc += v[0] + v[1] + v[2] + v[3];
                }
                first = false;
            }
        st_d(y, g, P.is_max ? acc : acc / count);
    }
}

/* ---- Col2Im, CenterCropPad ---------------------------------------------------------------------------------- */

/* A gather: each image element sums, kernel offset by kernel offset (the CPU's order), the one block
 * position per offset that lands on it. */
template <typename T> __global__ void k_col2im(const T *x, T *y, int64_t total, cuki_c2i P)
{
    GRID_LOOP(g, total) {
        int64_t nc = g / P.isz, q = g % P.isz, pos[8];
        for (int i = P.n - 1; i >= 0; i--) {
            pos[i] = q % P.img[i];
            q /= P.img[i];
        }
        double acc = 0;
        for (int64_t kb = 0; kb < P.bsz; kb++) {
            int64_t r = kb, l = 0, lm = 1;
            bool ok = true;
            for (int i = P.n - 1; i >= 0; i--) {
                int64_t kof = r % P.blk[i];
                r /= P.blk[i];
                int64_t t = pos[i] + P.pad[i] - kof * P.dil[i];
                if (t < 0 || t % P.st[i]) {
                    ok = false;
                    break;
                }
                int64_t li = t / P.st[i];
                if (li >= P.nblk[i]) {
                    ok = false;
                    break;
                }
                l += li * lm;
                lm *= P.nblk[i];
            }
            if (ok) acc += ld_d(x, (nc * P.bsz + kb) * P.L + l);
        }
        st_d(y, g, acc);
    }
}

template <typename T> __global__ void k_ccp(const T *x, T *y, int64_t n, cuki_ccp P)
{
    GRID_LOOP(g, n) {
        int64_t r = g, off = 0;
        bool inside = true;
        for (int d = P.rank - 1; d >= 0; d--) {
            int64_t c = r % P.od[d] + P.shift[d];
            r /= P.od[d];
            if (c < 0 || c >= P.id[d]) inside = false;
            off += c * P.ist[d];
        }
        y[g] = inside ? x[off] : (T)0;
    }
}

/* ---- DFT, windows --------------------------------------------------------------------------------------------- */

template <typename T>
__global__ void k_dft(const T *x, const double *tw, T *y, int64_t total, int64_t nin, int64_t L, int64_t olen,
                      int64_t inner, int64_t ic, int inv, int one)
{
    GRID_LOOP(g, total) {
        int64_t i = g % inner, t = g / inner, kk = t % olen, o = t / olen;
        const T *xs = x + (o * nin * inner + i) * ic;
        int64_t xst = inner * ic;
        if (inv && one) {
            int64_t half = (L + 1) / 2;
            double acc = nin > 0 ? ld_d(xs, 0) : 0.0;
            for (int64_t j = 1; j < half && j < nin; j++) {
                const double *w = tw + 2 * ((j * kk) % L);
                double re = ld_d(xs, j * xst), im = ic == 2 ? ld_d(xs, j * xst + 1) : 0.0;
                acc = __dadd_rn(acc, M(2, M(re, w[0]) - M(im, w[1])));
            }
            if (L % 2 == 0 && L / 2 < nin) acc = __dadd_rn(acc, M(ld_d(xs, (L / 2) * xst), (kk % 2) ? -1.0 : 1.0));
            st_d(y, g, acc / (double)L);
            continue;
        }
        int64_t n = nin < L ? nin : L;
        double sign = inv ? 1.0 : -1.0, scale = inv ? 1.0 / (double)L : 1.0, re = 0, im = 0;
        for (int64_t q = 0; q < n; q++) {
            const double *w = tw + 2 * ((kk * q) % L);
            double xr = ld_d(xs, q * xst), xi = ic == 2 ? ld_d(xs, q * xst + 1) : 0.0, wi = M(sign, w[1]);
            re = __dadd_rn(re, M(xr, w[0]) - M(xi, wi));
            im = __dadd_rn(im, M(xr, wi) + M(xi, w[0]));
        }
        st_d(y, 2 * g, M(re, scale));
        st_d(y, 2 * g + 1, M(im, scale));
    }
}

template <typename T> __global__ void k_window(T *y, int64_t n, double N1, int kind)
{
    const double pi = 3.14159265358979323846;
    GRID_LOOP(i, n) {
        double t = M(M(2.0, pi), (double)i) / N1, v;
        if (kind == 0) v = 0.5 - M(0.5, cos(t));
        else if (kind == 1) v = 25.0 / 46.0 - M(21.0 / 46.0, cos(t));
        else v = 0.42 - M(0.5, cos(t)) + M(0.08, cos(M(2.0, t)));
        st_d(y, i, v);
    }
}

/* ---- Einsum ----------------------------------------------------------------------------------------------------- */

/* One output per thread: the product of the operands summed over an odometer of the contracted labels
 * (double for floats, wrapping 64-bit integers otherwise, as on the CPU). The plan sits in shared memory. */
template <typename T> __global__ void k_einsum(const int64_t *plan, int64_t np, T *y, int64_t ny)
{
    extern __shared__ int64_t pl[];
    for (int64_t i = threadIdx.x; i < np; i += blockDim.x) pl[i] = plan[i];
    __syncthreads();
    int orank = (int)pl[0], ns = (int)pl[1], n = (int)pl[2];
    const int64_t *od = pl + 3, *ost = od + orank, *sd = ost + n * orank, *sst = sd + ns, *ptr = sst + n * ns;
    bool empty = false;
    for (int s = 0; s < ns; s++)
        if (sd[s] == 0) empty = true;
    GRID_LOOP(o, ny) {
        int64_t off[16], idx[64], r = o;
        for (int i = 0; i < n; i++) off[i] = 0;
        for (int d = orank - 1; d >= 0; d--) {
            int64_t c = r % od[d];
            r /= od[d];
            for (int i = 0; i < n; i++) off[i] += c * ost[i * orank + d];
        }
        for (int s = 0; s < ns; s++) idx[s] = 0;
        double accf = 0;
        uint64_t acci = 0;
        while (!empty) {
            if constexpr (tr<T>::kind == K_FLT) {
                double p = 1;
                for (int i = 0; i < n; i++) p = M(p, ld_d((const T *)ptr[i], off[i]));
                accf = __dadd_rn(accf, p);
            } else {
                uint64_t p = 1;
                for (int i = 0; i < n; i++) p *= (uint64_t)(int64_t)((const T *)ptr[i])[off[i]];
                acci += p;
            }
            int s = ns - 1;
            for (; s >= 0; s--) {
                for (int i = 0; i < n; i++) off[i] += sst[i * ns + s];
                if (++idx[s] < sd[s]) break;
                for (int i = 0; i < n; i++) off[i] -= sst[i * ns + s] * sd[s];
                idx[s] = 0;
            }
            if (s < 0) break;
        }
        if constexpr (tr<T>::kind == K_FLT) st_d(y, o, accf);
        else y[o] = (T)(int64_t)acci;
    }
}

} // namespace

extern "C" {

int cuki_widen(cudaStream_t s, int dtype, const void *x, double *y, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_NUM(dtype, (k_widen<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, y, n)));
    return last_error();
}

int cuki_narrow(cudaStream_t s, int dtype, const double *x, void *y, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_NUM(dtype, (k_narrow<T><<<blocks_for(n), THREADS, 0, s>>>(x, (T *)y, n)));
    return last_error();
}

int cuki_resize_pass(cudaStream_t s, const double *src, double *dst, const int64_t *idx, const double *w,
                     const uint8_t *ext, int64_t in_len, int64_t out_len, int64_t inner, int n, double extrap,
                     int64_t total)
{
    if (total <= 0) return 0;
    k_rs_pass<<<blocks_for(total), THREADS, 0, s>>>(src, dst, idx, w, ext, in_len, out_len, inner, n, extrap, total);
    return last_error();
}

int cuki_grid_sample(cudaStream_t s, int dtype, const void *x, const double *grid, void *y, int64_t n,
                     const cuki_gs *g)
{
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_grid_sample<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, grid, (T *)y, n, *g)));
    return last_error();
}

int cuki_affine_grid(cudaStream_t s, int dtype, const void *theta, void *y, int64_t n, int64_t npts, int nsp,
                     const int64_t *sz, int ac)
{
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_affine_grid<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)theta, (T *)y, n, npts, nsp,
                                                                            sz[0], sz[1], sz[2], ac)));
    return last_error();
}

int cuki_roi_align(cudaStream_t s, int dtype, const void *x, const void *rois, const void *bi, int bi64, void *y,
                   int64_t n, const cuki_roi *p)
{
    if (n <= 0 || p->N <= 0) return 0;
    DISPATCH_FLT(dtype, (k_roi_align<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (const T *)rois, bi, bi64,
                                                                          (T *)y, n, *p)));
    return last_error();
}

int cuki_col2im(cudaStream_t s, int dtype, const void *x, void *y, int64_t total, const cuki_c2i *p)
{
    if (total <= 0) return 0;
    DISPATCH_NUM(dtype, (k_col2im<T><<<blocks_for(total), THREADS, 0, s>>>((const T *)x, (T *)y, total, *p)));
    return last_error();
}

int cuki_center_crop_pad(cudaStream_t s, int esize, const void *x, void *y, int64_t n, const cuki_ccp *p)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_ccp<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, n, *p)));
    return last_error();
}

int cuki_dft(cudaStream_t s, int dtype, const void *x, const double *tw, void *y, int64_t n, int64_t nin, int64_t L,
             int64_t olen, int64_t inner, int64_t ic, int inv, int one)
{
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_dft<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, tw, (T *)y, n, nin, L, olen, inner,
                                                                    ic, inv, one)));
    return last_error();
}

int cuki_window(cudaStream_t s, int dtype, void *y, int64_t n, double N1, int kind)
{
    if (n <= 0) return 0;
    DISPATCH_NUM(dtype, (k_window<T><<<blocks_for(n), THREADS, 0, s>>>((T *)y, n, N1, kind)));
    return last_error();
}

int cuki_einsum(cudaStream_t s, int dtype, const int64_t *plan, int64_t np, void *y, int64_t ny)
{
    if (ny <= 0) return 0;
    size_t sh = sizeof(int64_t) * (size_t)np;
    DISPATCH_NUM(dtype, (k_einsum<T><<<blocks_for(ny), THREADS, sh, s>>>(plan, np, (T *)y, ny)));
    return last_error();
}

} // extern "C"
