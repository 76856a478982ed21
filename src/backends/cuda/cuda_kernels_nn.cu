/*
 * The CUDA backend's device code for the nn and normalisation ops: direct Conv2D / ConvTranspose2D (the
 * fallback when cuDNN is absent or cannot take the geometry), Max/Avg pooling, GlobalAvgPool,
 * BatchNormalization, FusedBatchNorm and its gradient, LayerNormalization, ArgMax/ArgMin, Pad (which also serves Tile) and the integer
 * MatMul that cuBLAS lacks. Each kernel
 * mirrors the OpenCL one of the same name (src/backends/opencl/ocl_nn_conv.c, ocl_reduce.c, ocl_shape.c),
 * so that every device computes what the CPU does.
 */
#include "cuda_dev.cuh"

namespace {

/* the accumulator type of the OpenCL kernels' DBL: double (every CUDA device has it) */
typedef double DBL;

/* One output element per thread (a gather: no two threads write the same element). */
template <typename S>
__global__ void k_conv2d(const S *x, const S *w, const S *bias, S *y, cuk_conv g, int64_t n_out)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(gid, n_out) {
        int64_t ow = gid % g.ow, t = gid / g.ow, oh = t % g.oh;
        t /= g.oh;
        int64_t o = t % g.oc, n = t / g.oc, icg = g.c / g.g, ocg = g.oc / g.g, grp = o / ocg;
        C acc = bias ? tr<S>::ld(bias, o) : (C)0;
        for (int64_t j = 0; j < icg; j++) {
            const S *xp = x + ((n * g.c + grp * icg + j) * g.h) * g.w;
            const S *wp = w + (o * icg + j) * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; a++) {
                int64_t ih = oh * g.sh - g.ph + a * g.dh;
                if (ih < 0 || ih >= g.h) continue;
                for (int64_t b = 0; b < g.kw; b++) {
                    int64_t iw = ow * g.sw - g.pw + b * g.dw;
                    if (iw >= 0 && iw < g.w) acc += tr<S>::ld(wp, a * g.kw + b) * tr<S>::ld(xp, ih * g.w + iw);
                }
            }
        }
        tr<S>::st(y, gid, acc);
    }
}

/* The transpose as a gather: output (yh, yw) receives input (ih, iw) through tap (a, b) when
 * yh = ih*SH - PH + a*DH, so ih = (yh + PH - a*DH) / SH where that divides exactly. W is [C, OC/G, KH, KW]. */
template <typename S>
__global__ void k_convt2d(const S *x, const S *w, const S *bias, S *y, cuk_conv g, int64_t n_out)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(gid, n_out) {
        int64_t yw = gid % g.ow, t = gid / g.ow, yh = t % g.oh;
        t /= g.oh;
        int64_t o = t % g.oc, n = t / g.oc, icg = g.c / g.g, ocg = g.oc / g.g, grp = o / ocg, oo = o % ocg;
        C acc = bias ? tr<S>::ld(bias, o) : (C)0;
        for (int64_t j = 0; j < icg; j++) {
            int64_t ic = grp * icg + j;
            const S *xp = x + (n * g.c + ic) * g.h * g.w;
            const S *wp = w + (ic * ocg + oo) * g.kh * g.kw;
            for (int64_t a = 0; a < g.kh; a++) {
                int64_t th = yh + g.ph - a * g.dh;
                if (th < 0 || th % g.sh) continue;
                int64_t ih = th / g.sh;
                if (ih >= g.h) continue;
                for (int64_t b = 0; b < g.kw; b++) {
                    int64_t tw = yw + g.pw - b * g.dw;
                    if (tw < 0 || tw % g.sw) continue;
                    int64_t iw = tw / g.sw;
                    if (iw < g.w) acc += tr<S>::ld(wp, a * g.kw + b) * tr<S>::ld(xp, ih * g.w + iw);
                }
            }
        }
        tr<S>::st(y, gid, acc);
    }
}

/* Pools exactly as the CPU's direct loop: max propagates the first NaN; avg divides by the taps inside
 * the padded extent (count_include_pad) or inside the input, NaN over none. */
template <typename S>
__global__ void k_pool2d(const S *x, S *y, cuk_conv g, int64_t peh, int64_t pew, int is_max, int include_pad,
                         int64_t n_out)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(gid, n_out) {
        int64_t yw = gid % g.ow, t = gid / g.ow, yh = t % g.oh, p = t / g.oh;
        const S *xp = x + p * g.h * g.w;
        DBL acc = is_max ? -INFINITY : 0;
        int64_t n_valid = 0, n_pad = 0;
        for (int64_t a = 0; a < g.kh; a++) {
            int64_t ih = yh * g.sh - g.ph + a * g.dh;
            if (ih < -g.ph || ih >= g.h + peh) continue;
            for (int64_t b = 0; b < g.kw; b++) {
                int64_t iw = yw * g.sw - g.pw + b * g.dw;
                if (iw < -g.pw || iw >= g.w + pew) continue;
                n_pad++;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                n_valid++;
                DBL v = (DBL)tr<S>::ld(xp, ih * g.w + iw);
                if (is_max) {
                    if (v > acc || v != v) acc = acc != acc ? acc : v;
                } else {
                    acc += v;
                }
            }
        }
        if (!is_max) {
            int64_t div = include_pad ? n_pad : n_valid;
            acc = div ? acc / (DBL)div : (DBL)NAN;
        }
        tr<S>::st(y, gid, (C)acc);
    }
}

/* One block per plane: the mean in double. */
template <typename S> __global__ void k_gap(const S *x, S *y, int64_t planes, int64_t inner)
{
    typedef typename tr<S>::C C;
    for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
        const S *xp = x + p * inner;
        DBL acc = 0;
        for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) acc += (DBL)tr<S>::ld(xp, i);
        acc = block_reduce(acc, [](DBL u, DBL v) { return u + v; });
        if (threadIdx.x == 0) tr<S>::st(y, p, (C)(inner ? acc / (DBL)inner : (DBL)NAN));
    }
}

/* y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a per channel (in double, then CT) */
template <typename S>
__global__ void k_batchnorm(const S *x, S *y, const S *sc, const S *bi, const S *mean, const S *var, int64_t n,
                            int64_t C_, int64_t S_, double eps)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(i, n) {
        int64_t c = (i / S_) % C_;
        DBL a = (DBL)tr<S>::ld(sc, c) / sqrt((DBL)tr<S>::ld(var, c) + eps);
        DBL b = (DBL)tr<S>::ld(bi, c) - (DBL)tr<S>::ld(mean, c) * a;
        tr<S>::st(y, i, tr<S>::ld(x, i) * (C)a + (C)b);
    }
}

/* FusedBatchNorm over x [N, C, S] (training): one block per channel for the mean, then the centred sum
 * of squares (double; the biased variance), as the OpenCL kernel fbn_stats; then y = (x - mean) a + offset
 * per element, centred first as the CPU does. */
template <typename S>
__global__ void k_fbn_stats(const S *x, S *mean, S *var, int64_t N, int64_t C_, int64_t S_)
{
    typedef typename tr<S>::C C;
    int64_t M = N * S_;
    for (int64_t c = blockIdx.x; c < C_; c += gridDim.x) {
        DBL sum = 0, sq = 0;
        for (int64_t j = threadIdx.x; j < M; j += blockDim.x)
            sum += (DBL)tr<S>::ld(x, ((j / S_) * C_ + c) * S_ + j % S_);
        sum = block_reduce(sum, [](DBL u, DBL v) { return u + v; });
        DBL m = sum / (DBL)M;
        for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
            DBL d = (DBL)tr<S>::ld(x, ((j / S_) * C_ + c) * S_ + j % S_) - m;
            sq += d * d;
        }
        sq = block_reduce(sq, [](DBL u, DBL v) { return u + v; });
        if (threadIdx.x == 0) {
            tr<S>::st(mean, c, (C)m);
            tr<S>::st(var, c, (C)(sq / (DBL)M));
        }
    }
}

template <typename S>
__global__ void k_fbn_apply(const S *x, S *y, const S *sc, const S *bi, const S *mean, const S *var, int64_t n,
                            int64_t C_, int64_t S_, double eps)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(i, n) {
        int64_t c = (i / S_) % C_;
        C a = (C)((DBL)tr<S>::ld(sc, c) / sqrt((DBL)tr<S>::ld(var, c) + eps));
        tr<S>::st(y, i, (tr<S>::ld(x, i) - tr<S>::ld(mean, c)) * a + tr<S>::ld(bi, c));
    }
}

/* FusedBatchNormGrad: per channel the sums of dy and dy xhat (one block each), then dx per element. */
template <typename S>
__global__ void k_fbn_grad_red(const S *dy, const S *x, const S *mean, const S *var, S *dsc, S *dof, int64_t N,
                               int64_t C_, int64_t S_, double eps)
{
    typedef typename tr<S>::C C;
    int64_t M = N * S_;
    for (int64_t c = blockIdx.x; c < C_; c += gridDim.x) {
        DBL m = (DBL)tr<S>::ld(mean, c), r = 1 / sqrt((DBL)tr<S>::ld(var, c) + eps), so = 0, ss = 0;
        for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
            int64_t i = ((j / S_) * C_ + c) * S_ + j % S_;
            DBL g = (DBL)tr<S>::ld(dy, i);
            so += g;
            ss += g * ((DBL)tr<S>::ld(x, i) - m) * r;
        }
        so = block_reduce(so, [](DBL u, DBL v) { return u + v; });
        ss = block_reduce(ss, [](DBL u, DBL v) { return u + v; });
        if (threadIdx.x == 0) {
            tr<S>::st(dof, c, (C)so);
            tr<S>::st(dsc, c, (C)ss);
        }
    }
}

template <typename S>
__global__ void k_fbn_grad_dx(const S *dy, const S *x, S *dx, const S *sc, const S *mean, const S *var, const S *dsc,
                              const S *dof, const S *dm, const S *dv, int64_t n, int64_t C_, int64_t S_, int64_t M,
                              double eps)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(i, n) {
        int64_t c = (i / S_) % C_;
        DBL Md = (DBL)M, r = 1 / sqrt((DBL)tr<S>::ld(var, c) + eps);
        DBL xc = (DBL)tr<S>::ld(x, i) - (DBL)tr<S>::ld(mean, c);
        DBL g = (DBL)tr<S>::ld(sc, c) * r *
                ((DBL)tr<S>::ld(dy, i) - (DBL)tr<S>::ld(dof, c) / Md - xc * r * (DBL)tr<S>::ld(dsc, c) / Md);
        if (dm) g += (DBL)tr<S>::ld(dm, c) / Md;
        if (dv) g += (DBL)tr<S>::ld(dv, c) * 2 * xc / Md;
        tr<S>::st(dx, i, (C)g);
    }
}

struct ln_geom {
    int64_t nd[CUK_MAX_RANK], ss[CUK_MAX_RANK], bs[CUK_MAX_RANK];
    int nr;
    int s_direct, b_direct;
};

__device__ __forceinline__ int64_t pidx(int64_t d, int nr, const int64_t *nd, const int64_t *ps)
{
    int64_t off = 0;
    for (int i = nr - 1; i >= 0; i--) {
        off += (d % nd[i]) * ps[i];
        d /= nd[i];
    }
    return off;
}

/* One block per row of D: the mean, then the centred sum of squares, both in double (the OpenCL kernel's
 * two passes, summed in a different order). */
template <typename S>
__global__ void k_layernorm(const S *x, S *y, const S *sc, const S *bi, float *mo, float *io, int64_t rows, int64_t D,
                            double eps, ln_geom g)
{
    typedef typename tr<S>::C C;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const S *xr = x + row * D;
        S *yr = y + row * D;
        DBL sum = 0;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) sum += (DBL)tr<S>::ld(xr, i);
        sum = block_reduce(sum, [](DBL u, DBL v) { return u + v; });
        DBL mean = sum / (DBL)D, sq = 0;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
            DBL d = (DBL)tr<S>::ld(xr, i) - mean;
            sq += d * d;
        }
        sq = block_reduce(sq, [](DBL u, DBL v) { return u + v; });
        C inv = (C)(1 / sqrt(sq / (DBL)D + eps)), mf = (C)mean;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
            C s = tr<S>::ld(sc, g.s_direct ? i : pidx(i, g.nr, g.nd, g.ss));
            C v = (tr<S>::ld(xr, i) - mf) * inv * s;
            if (bi) v += tr<S>::ld(bi, g.b_direct ? i : pidx(i, g.nr, g.nd, g.bs));
            tr<S>::st(yr, i, v);
        }
        if (threadIdx.x == 0) {
            if (mo) mo[row] = (float)mean;
            if (io) io[row] = (float)inv;
        }
    }
}

template <typename S>
__global__ void k_argext(const S *x, int64_t *y, int64_t n_out, int64_t R, int64_t inner, int is_max, int last)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(gi, n_out) {
        int64_t o = gi / inner, i = gi % inner;
        const S *p = x + o * R * inner + i;
        C best = tr<S>::ld(p, 0);
        int64_t idx = 0;
        for (int64_t r = 1; r < R; r++) {
            C v = tr<S>::ld(p, r * inner);
            bool vn = is_nan(v), bn = is_nan(best), take;
            if (vn) take = last || !bn;
            else take = !bn && (is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best));
            if (take) {
                best = v;
                idx = r;
            }
        }
        y[gi] = idx;
    }
}

struct pad_geom {
    int64_t od[CUK_MAX_RANK], id[CUK_MAX_RANK], pb[CUK_MAX_RANK], is[CUK_MAX_RANK];
    int rank, mode;
};

/* mode 0 constant, 1 reflect, 2 edge, 3 wrap; -1: the padding value */
__device__ __forceinline__ int64_t pad_map(int64_t i, int64_t n, int mode)
{
    if (i >= 0 && i < n) return i;
    if (mode == 2) return i < 0 ? 0 : n - 1;
    if (mode == 3) return ((i % n) + n) % n;
    if (mode == 1) {
        if (n == 1) return 0;
        int64_t p = 2 * (n - 1), m = ((i % p) + p) % p;
        return m >= n ? p - m : m;
    }
    return -1;
}

template <typename E> __global__ void k_pad(const E *x, E *y, int64_t n, pad_geom g, E pat)
{
    GRID_LOOP(i, n) {
        int64_t r = i, so = 0;
        bool outside = false;
        for (int a = g.rank - 1; a >= 0; a--) {
            int64_t c = r % g.od[a];
            r /= g.od[a];
            int64_t m = pad_map(c - g.pb[a], g.id[a], g.mode);
            if (m < 0) outside = true;
            else so += m * g.is[a];
        }
        y[i] = outside ? pat : x[so];
    }
}

unsigned grid_rows(int64_t rows) { return (unsigned)(rows < (1 << 20) ? rows : (1 << 20)); }

/* Integer MatMul: 16 x 16 output tiles, K staged through shared memory in 16-wide slabs, products
 * summed in wrapping u64 and truncated to T at the end, as the CPU's reference loop (the order of the
 * additions cannot change a sum modulo 2^64). Batch entries, row tiles and column tiles are grid-stride
 * loops over z, y and x; their bounds are block-uniform, so every thread reaches each barrier. */
const int MM_TILE = 16;

template <typename T> __global__ void k_imatmul(const T *a, const T *b, T *c, cuk_igemm g)
{
    __shared__ uint64_t ta[MM_TILE][MM_TILE], tb[MM_TILE][MM_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t bi = blockIdx.z; bi < g.batch; bi += gridDim.z) {
        int64_t ao = 0, bo = 0, r = bi;
        for (int i = g.nb - 1; i >= 0; i--) {
            int64_t idx = r % g.bat[i];
            r /= g.bat[i];
            ao += idx * g.a_bs[i];
            bo += idx * g.b_bs[i];
        }
        const T *pa = a + ao, *pb = b + bo;
        T *pc = c + bi * g.m * g.n;
        for (int64_t r0 = (int64_t)blockIdx.y * MM_TILE; r0 < g.m; r0 += (int64_t)gridDim.y * MM_TILE)
            for (int64_t c0 = (int64_t)blockIdx.x * MM_TILE; c0 < g.n; c0 += (int64_t)gridDim.x * MM_TILE) {
                int64_t row = r0 + ty, col = c0 + tx;
                uint64_t acc = 0;
                for (int64_t k0 = 0; k0 < g.k; k0 += MM_TILE) {
                    ta[ty][tx] = row < g.m && k0 + tx < g.k ? (uint64_t)(int64_t)pa[row * g.sam + (k0 + tx) * g.sak] : 0;
                    tb[ty][tx] = k0 + ty < g.k && col < g.n ? (uint64_t)(int64_t)pb[(k0 + ty) * g.sbk + col * g.sbn] : 0;
                    __syncthreads();
                    for (int q = 0; q < MM_TILE; q++) acc += ta[ty][q] * tb[q][tx];
                    __syncthreads();
                }
                if (row < g.m && col < g.n) pc[row * g.n + col] = (T)acc;
            }
    }
}

template <typename T>
__global__ void k_igemm_epilogue(T *y, const T *c, int64_t m, int64_t n, int64_t cs0, int64_t cs1, double alpha,
                                 double beta)
{
    GRID_LOOP(idx, m * n)
    {
        int64_t v = (int64_t)__dmul_rn((double)y[idx], alpha);
        if (c) v += (int64_t)__dmul_rn(beta, (double)c[idx / n * cs0 + idx % n * cs1]);
        y[idx] = (T)v;
    }
}

} // namespace

extern "C" {

int cuk_conv2d(cudaStream_t s, int dtype, int transposed, const void *x, const void *w, const void *b, void *y,
               const cuk_conv *g)
{
    int64_t n = g->n * g->oc * g->oh * g->ow;
    if (n <= 0) return 0;
    if (transposed)
        DISPATCH_FLT(dtype, (k_convt2d<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (const T *)w, (const T *)b,
                                                                            (T *)y, *g, n)))
    else
        DISPATCH_FLT(dtype, (k_conv2d<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (const T *)w, (const T *)b,
                                                                           (T *)y, *g, n)))
    return last_error();
}

int cuk_pool2d(cudaStream_t s, int dtype, const void *x, void *y, const cuk_conv *g, int64_t pe_h, int64_t pe_w,
               int is_max, int include_pad)
{
    int64_t n = g->n * g->c * g->oh * g->ow;
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_pool2d<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, *g, pe_h, pe_w, is_max,
                                                                       include_pad, n)));
    return last_error();
}

int cuk_gap(cudaStream_t s, int dtype, const void *x, void *y, int64_t planes, int64_t inner)
{
    if (planes <= 0) return 0;
    DISPATCH_FLT(dtype, (k_gap<T><<<grid_rows(planes), THREADS, 0, s>>>((const T *)x, (T *)y, planes, inner)));
    return last_error();
}

int cuk_batchnorm(cudaStream_t s, int dtype, const void *x, void *y, const void *scale, const void *bias,
                  const void *mean, const void *var, int64_t n, int64_t C, int64_t S, double eps)
{
    if (n <= 0) return 0;
    DISPATCH_FLT(dtype, (k_batchnorm<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, (const T *)scale,
                                                                          (const T *)bias, (const T *)mean,
                                                                          (const T *)var, n, C, S, eps)));
    return last_error();
}

int cuk_fused_bn(cudaStream_t s, int dtype, const void *x, void *y, const void *scale, const void *offset, void *mean,
                 void *var, int64_t N, int64_t C, int64_t S, double eps)
{
    if (C <= 0) return 0;
    DISPATCH_FLT(dtype, (k_fbn_stats<T><<<grid_rows(C), THREADS, 0, s>>>((const T *)x, (T *)mean, (T *)var, N, C, S)));
    int64_t n = N * C * S;
    if (n <= 0) return last_error();
    DISPATCH_FLT(dtype, (k_fbn_apply<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, (const T *)scale,
                                                                          (const T *)offset, (const T *)mean,
                                                                          (const T *)var, n, C, S, eps)));
    return last_error();
}

int cuk_fused_bn_grad(cudaStream_t s, int dtype, const void *dy, const void *x, void *dx, const void *scale,
                      const void *mean, const void *var, const void *dmean, const void *dvar, void *dscale,
                      void *doffset, int64_t N, int64_t C, int64_t S, double eps)
{
    if (C <= 0) return 0;
    DISPATCH_FLT(dtype, (k_fbn_grad_red<T><<<grid_rows(C), THREADS, 0, s>>>((const T *)dy, (const T *)x,
                                                                            (const T *)mean, (const T *)var,
                                                                            (T *)dscale, (T *)doffset, N, C, S, eps)));
    int64_t n = N * C * S;
    if (n <= 0) return last_error();
    DISPATCH_FLT(dtype, (k_fbn_grad_dx<T><<<blocks_for(n), THREADS, 0, s>>>(
                            (const T *)dy, (const T *)x, (T *)dx, (const T *)scale, (const T *)mean, (const T *)var,
                            (const T *)dscale, (const T *)doffset, (const T *)dmean, (const T *)dvar, n, C, S, N * S,
                            eps)));
    return last_error();
}

int cuk_layernorm(cudaStream_t s, int dtype, const void *x, void *y, const void *scale, const void *bias, float *mean,
                  float *inv_std, int64_t rows, int64_t D, double eps, int nr, const int64_t *nd, const int64_t *ss,
                  const int64_t *bs)
{
    if (rows <= 0) return 0;
    if (nr > CUK_MAX_RANK) return (int)cudaErrorInvalidValue;
    ln_geom g;
    g.nr = nr;
    g.s_direct = g.b_direct = 1;
    for (int i = 0; i < CUK_MAX_RANK; i++) {
        g.nd[i] = i < nr ? nd[i] : 1;
        g.ss[i] = i < nr ? ss[i] : 0;
        g.bs[i] = i < nr && bs ? bs[i] : 0;
    }
    /* a parameter whose strides are the contiguous strides of nd is read at the element index itself */
    int64_t acc = 1;
    for (int i = nr - 1; i >= 0; i--) {
        if (g.nd[i] != 1 && g.ss[i] != acc) g.s_direct = 0;
        if (g.nd[i] != 1 && g.bs[i] != acc) g.b_direct = 0;
        acc *= g.nd[i];
    }
    DISPATCH_FLT(dtype, (k_layernorm<T><<<grid_rows(rows), THREADS, 0, s>>>((const T *)x, (T *)y, (const T *)scale,
                                                                            (const T *)bias, mean, inv_std, rows, D,
                                                                            eps, g)));
    return last_error();
}

int cuk_argext(cudaStream_t s, int dtype, const void *x, int64_t *y, int64_t outer, int64_t R, int64_t inner,
               int is_max, int last)
{
    int64_t n = outer * inner;
    if (n <= 0 || R <= 0) return 0;
    switch (dtype) {
    case 1: k_argext<float><<<blocks_for(n), THREADS, 0, s>>>((const float *)x, y, n, R, inner, is_max, last); break;
    case 2: k_argext<double><<<blocks_for(n), THREADS, 0, s>>>((const double *)x, y, n, R, inner, is_max, last); break;
    case 3: k_argext<__half><<<blocks_for(n), THREADS, 0, s>>>((const __half *)x, y, n, R, inner, is_max, last); break;
    case 4: k_argext<bf16s><<<blocks_for(n), THREADS, 0, s>>>((const bf16s *)x, y, n, R, inner, is_max, last); break;
    case 5: k_argext<int8_t><<<blocks_for(n), THREADS, 0, s>>>((const int8_t *)x, y, n, R, inner, is_max, last); break;
    case 6: k_argext<uint8_t><<<blocks_for(n), THREADS, 0, s>>>((const uint8_t *)x, y, n, R, inner, is_max, last); break;
    case 7: k_argext<int16_t><<<blocks_for(n), THREADS, 0, s>>>((const int16_t *)x, y, n, R, inner, is_max, last); break;
    case 8: k_argext<int32_t><<<blocks_for(n), THREADS, 0, s>>>((const int32_t *)x, y, n, R, inner, is_max, last); break;
    case 9: k_argext<int64_t><<<blocks_for(n), THREADS, 0, s>>>((const int64_t *)x, y, n, R, inner, is_max, last); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return last_error();
}

int cuk_pad(cudaStream_t s, int esize, const void *x, void *y, int64_t n, int rank, const int64_t *od,
            const int64_t *idims, const int64_t *pb, const int64_t *ist, int mode, uint64_t pat)
{
    if (n <= 0) return 0;
    if (rank > CUK_MAX_RANK) return (int)cudaErrorInvalidValue;
    pad_geom g;
    g.rank = rank;
    g.mode = mode;
    for (int i = 0; i < CUK_MAX_RANK; i++) {
        g.od[i] = i < rank ? od[i] : 1;
        g.id[i] = i < rank ? idims[i] : 1;
        g.pb[i] = i < rank ? pb[i] : 0;
        g.is[i] = i < rank ? ist[i] : 0;
    }
    /* the pattern's low bytes are the element (little-endian) */
    DISPATCH_SIZE(esize, (k_pad<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, n, g, (T)pat)));
    return last_error();
}

int cuk_imatmul(cudaStream_t s, int dtype, const void *a, const void *b, void *c, const cuk_igemm *g)
{
    if (g->batch <= 0 || g->m <= 0 || g->n <= 0) return 0;
    if (g->nb > CUK_MAX_RANK) return (int)cudaErrorInvalidValue;
    int64_t gx = (g->n + MM_TILE - 1) / MM_TILE, gy = (g->m + MM_TILE - 1) / MM_TILE;
    dim3 grid((unsigned)(gx < 65535 ? gx : 65535), (unsigned)(gy < 65535 ? gy : 65535),
              (unsigned)(g->batch < 65535 ? g->batch : 65535));
    dim3 block(MM_TILE, MM_TILE);
    if (dtype == 8) k_imatmul<int32_t><<<grid, block, 0, s>>>((const int32_t *)a, (const int32_t *)b, (int32_t *)c, *g);
    else if (dtype == 9) k_imatmul<int64_t><<<grid, block, 0, s>>>((const int64_t *)a, (const int64_t *)b, (int64_t *)c, *g);
    else return (int)cudaErrorInvalidValue;
    return last_error();
}

int cuk_igemm_epilogue(cudaStream_t s, int dtype, void *y, const void *c, int64_t m, int64_t n, int64_t cs0, int64_t cs1,
                       double alpha, double beta)
{
    if (m <= 0 || n <= 0) return 0;
    if (dtype == 8)
        k_igemm_epilogue<int32_t><<<blocks_for(m * n), THREADS, 0, s>>>((int32_t *)y, (const int32_t *)c, m, n, cs0, cs1,
                                                                        alpha, beta);
    else if (dtype == 9)
        k_igemm_epilogue<int64_t><<<blocks_for(m * n), THREADS, 0, s>>>((int64_t *)y, (const int64_t *)c, m, n, cs0, cs1,
                                                                        alpha, beta);
    else return (int)cudaErrorInvalidValue;
    return last_error();
}

} // extern "C"
