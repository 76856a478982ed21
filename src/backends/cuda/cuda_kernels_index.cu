/*
 * Device code of the CUDA indexing and fill ops (cuda_index.c): OneHot, GatherND / ScatterND,
 * GatherElements / ScatterElements, Trilu, CumSum / CumProd, ReverseSequence and pattern fills
 * (ConstantOfShape, Fill, EyeLike). Ports of the OpenCL kernels (src/backends/opencl/ocl_shape.c,
 * ocl_shape_index.c): indices wrap once when negative and are then clamped; an index out of range is
 * reported in the device's error record (cuk_flag), read by the host at the next synchronisation. The
 * scatters run a checking pass first, which also marks each index's target in a bitmap: when two indices
 * hit one target, the scatter runs in index order, as the CPU does, else one thread per index. Scans
 * accumulate in double (floats) or wrapping 64-bit integers.
 */
#include "cuda_dev.cuh"
#include "cuda_kern_ext.h"

namespace {

__device__ __forceinline__ int64_t ld_idx(const void *p, int i64, int64_t i)
{
    return i64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

__device__ __forceinline__ int64_t fix(int64_t v, int64_t n)
{
    if (v < 0) v += n;
    return v < 0 ? 0 : v >= n ? n - 1 : v;
}

__device__ __forceinline__ int64_t tuple_off(const void *ix, int i64, int64_t t, const cuk_dims &nd)
{
    int64_t o = 0;
    for (int c = 0; c < nd.n; c++) o += fix(ld_idx(ix, i64, t * nd.n + c), nd.d[c]) * nd.s[c];
    return o;
}

/* the offset in data of element i of indices, its axis coordinate replaced by the index */
__device__ __forceinline__ int64_t elem_off(const void *ix, int i64, int64_t i, const cuk_dims &id, const int64_t *xs,
                                            int ax, int64_t D)
{
    int64_t r = i, o = 0;
    for (int a = id.n - 1; a >= 0; a--) {
        int64_t c = r % id.d[a];
        r /= id.d[a];
        o += (a == ax ? fix(ld_idx(ix, i64, i), D) : c) * xs[a];
    }
    return o;
}

struct strides8 {
    int64_t v[CUK_MAX_RANK];
};

/* an index of any numeric dtype, truncated toward zero as the CPU's conversion */
template <typename S> __device__ __forceinline__ int64_t ld_any(const S *p, int64_t i)
{
    typename tr<S>::C v = tr<S>::ld(p, i);
    if constexpr (tr<S>::kind == K_FLT) return v != v ? 0 : (int64_t)v;
    else return (int64_t)v;
}

template <typename S, typename E>
__global__ void k_onehot(const S *ix, const E *vals, E *y, int64_t n, int64_t depth, int64_t inner)
{
    GRID_LOOP(i, n) {
        int64_t in = i % inner, t = i / inner, v = t % depth;
        int64_t q = ld_any(ix, (t / depth) * inner + in);
        if (q < 0) q += depth;
        y[i] = q == v ? vals[1] : vals[0];
    }
}

template <typename E>
__global__ void k_gathernd(const E *x, const void *ix, int i64, E *y, int64_t n, cuk_dims nd, int64_t slice,
                           int64_t per_batch, int64_t batch_elems, cuk_err *err, unsigned long long site)
{
    GRID_LOOP(u, n) {
        int64_t e = u % slice, t = u / slice;
        if (e == 0) /* one thread per tuple checks it; the clamped read below stays inside data */
            for (int c = 0; c < nd.n; c++) {
                int64_t v = ld_idx(ix, i64, t * nd.n + c);
                if (v < -nd.d[c] || v >= nd.d[c]) {
                    cuk_flag(err, site, v, t, c);
                    break;
                }
            }
        y[u] = x[(t / per_batch) * batch_elems + tuple_off(ix, i64, t, nd) + e];
    }
}

/* red: 1 add, 2 mul, 3 max, 4 min; NaN wins max and min, integers wrap, bool is or / and */
template <typename S> __device__ __forceinline__ typename tr<S>::C comb(typename tr<S>::C a, typename tr<S>::C b, int red)
{
    typedef typename tr<S>::C C;
    if constexpr (tr<S>::kind == K_FLT) {
        if (red == 1) return a + b;
        if (red == 2) return a * b;
        if (a != a || b != b) return a + b;
        return red == 3 ? (a > b ? a : b) : (a < b ? a : b);
    } else if constexpr (tr<S>::kind == K_BOOL) {
        return (red == 1 || red == 3) ? (C)((a | b) != 0) : (C)((a & b) != 0);
    } else {
        if (red == 1) return (C)((uint64_t)(int64_t)a + (uint64_t)(int64_t)b);
        if (red == 2) return (C)((uint64_t)(int64_t)a * (uint64_t)(int64_t)b);
        return red == 3 ? (a > b ? a : b) : (a < b ? a : b);
    }
}

template <typename S> __device__ __forceinline__ void put(S *y, int64_t o, const S *u, int64_t ui, int red)
{
    if (!red) y[o] = u[ui];
    else tr<S>::st(y, o, comb<S>(tr<S>::ld(y, o), tr<S>::ld(u, ui), red));
}

/* The scatters' checking pass, one thread per index (ScatterND: per tuple): an index out of range is
 * reported in err; a valid one sets its target's bit in bm[1...], and a target already set sets bm[0]
 * (duplicates: the scatter then runs in index order). bm NULL: check only. */
__device__ __forceinline__ void mark_target(unsigned *bm, int64_t t)
{
    unsigned bit = 1u << (unsigned)(t & 31);
    if (atomicOr(&bm[1 + (t >> 5)], bit) & bit) atomicExch(&bm[0], 1u);
}

__global__ void k_scatternd_check(const void *ix, int i64, cuk_dims nd, int64_t slice, int64_t ntup, unsigned *bm,
                                  cuk_err *err, unsigned long long site)
{
    GRID_LOOP(t, ntup) {
        bool ok = true;
        for (int c = 0; ok && c < nd.n; c++) {
            int64_t v = ld_idx(ix, i64, t * nd.n + c);
            if (v < -nd.d[c] || v >= nd.d[c]) {
                cuk_flag(err, site, v, t, c);
                ok = false;
            }
        }
        if (ok && bm) mark_target(bm, tuple_off(ix, i64, t, nd) / slice);
    }
}

/* dup (bm[0], set by the checking pass): one thread per slice element walks the tuples in order */
template <typename S>
__global__ void k_scatternd(S *y, const S *u, const void *ix, int i64, cuk_dims nd, int64_t slice, int64_t ntup,
                            const unsigned *dup, int red, int64_t n)
{
    if (*dup) {
        GRID_LOOP(g, slice) {
            for (int64_t t = 0; t < ntup; t++) put(y, tuple_off(ix, i64, t, nd) + g, u, t * slice + g, red);
        }
        return;
    }
    GRID_LOOP(g, n) {
        int64_t t = g / slice, e = g % slice;
        put(y, tuple_off(ix, i64, t, nd) + e, u, g, red);
    }
}

template <typename E>
__global__ void k_gather_el(const E *x, const void *ix, int i64, E *y, int64_t n, cuk_dims id, strides8 xs, int ax,
                            int64_t D, cuk_err *err, unsigned long long site)
{
    GRID_LOOP(i, n) {
        int64_t v = ld_idx(ix, i64, i);
        if (v < -D || v >= D) {
            cuk_flag(err, site, v, i, 0);
            y[i] = E();
        } else {
            y[i] = x[elem_off(ix, i64, i, id, xs.v, ax, D)];
        }
    }
}

/* ScatterElements' checking pass: one thread per index, its target the element of y it writes */
__global__ void k_scatter_el_check(const void *ix, int i64, int64_t n, cuk_dims id, strides8 ys, int ax, int64_t D,
                                   unsigned *bm, cuk_err *err, unsigned long long site)
{
    GRID_LOOP(i, n) {
        int64_t v = ld_idx(ix, i64, i);
        if (v < -D || v >= D) cuk_flag(err, site, v, i, 0);
        else mark_target(bm, elem_off(ix, i64, i, id, ys.v, ax, D));
    }
}

/* dup (bm[0], set by the checking pass): a single thread walks every index in order */
template <typename S>
__global__ void k_scatter_el(S *y, const S *u, const void *ix, int i64, int64_t n, cuk_dims id, strides8 ys, int ax,
                             int64_t D, const unsigned *dup, int red)
{
    if (*dup) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            for (int64_t i = 0; i < n; i++) put(y, elem_off(ix, i64, i, id, ys.v, ax, D), u, i, red);
        return;
    }
    GRID_LOOP(i, n) { put(y, elem_off(ix, i64, i, id, ys.v, ax, D), u, i, red); }
}

template <typename E>
__global__ void k_trilu(const E *x, E *y, int64_t n, int64_t R, int64_t C, int64_t k, int upper)
{
    GRID_LOOP(i, n) {
        int64_t c = i % C, r = (i / C) % R;
        bool keep = upper ? c >= r + k : c <= r + k;
        y[i] = keep ? x[i] : (E)0;
    }
}

/* one thread per (outer, inner) line walks the axis in scan order */
template <typename S>
__global__ void k_cumsum(const S *x, S *y, int64_t lines, int64_t D, int64_t inner, int excl, int rev, int prod)
{
    typedef typename tr<S>::C C;
    GRID_LOOP(g, lines) {
        int64_t base = (g / inner) * D * inner + g % inner;
        if constexpr (tr<S>::kind == K_FLT) {
            double acc = prod ? 1 : 0;
            for (int64_t t = 0; t < D; t++) {
                int64_t p = base + (rev ? D - 1 - t : t) * inner;
                double v = (double)tr<S>::ld(x, p);
                if (excl) tr<S>::st(y, p, (C)acc);
                acc = prod ? acc * v : acc + v;
                if (!excl) tr<S>::st(y, p, (C)acc);
            }
        } else {
            uint64_t acc = prod ? 1 : 0;
            for (int64_t t = 0; t < D; t++) {
                int64_t p = base + (rev ? D - 1 - t : t) * inner;
                uint64_t v = tr<S>::kind == K_BOOL ? (uint64_t)(tr<S>::ld(x, p) != 0) : (uint64_t)(int64_t)tr<S>::ld(x, p);
                if (excl) tr<S>::st(y, p, (C)acc);
                acc = prod ? acc * v : acc + v;
                if (!excl) tr<S>::st(y, p, (C)acc);
            }
        }
    }
}

/* a length outside [0, T] is reported in err as (site, length, batch, T) */
__global__ void k_revseq_check(const void *lens, int i64, int64_t B, int64_t T, cuk_err *err, unsigned long long site)
{
    GRID_LOOP(b, B) {
        int64_t len = ld_idx(lens, i64, b);
        if (len < 0 || len > T) cuk_flag(err, site, len, b, T);
    }
}

template <typename E>
__global__ void k_revseq(const E *x, const void *lens, int i64, E *y, int64_t n, int ba, int64_t B, int64_t T, int64_t blk)
{
    GRID_LOOP(i, n) {
        int64_t e = i % blk, r = i / blk;
        int64_t b = ba == 0 ? r / T : r % B, t = ba == 0 ? r % T : r / B;
        int64_t len = ld_idx(lens, i64, b);
        len = len < 0 ? 0 : len > T ? T : len;
        int64_t s = t < len ? len - 1 - t : t;
        int64_t src = ba == 0 ? b * T + s : s * B + b;
        y[i] = x[src * blk + e];
    }
}

/* a value outside [lo, hi) is reported in err as (site, value, position, shown) */
__global__ void k_range_check(const void *v, int i64, int64_t n, int64_t lo, int64_t hi, int64_t shown, cuk_err *err,
                              unsigned long long site)
{
    GRID_LOOP(i, n) {
        int64_t x = ld_idx(v, i64, i);
        if (x < lo || x >= hi) cuk_flag(err, site, x, i, shown);
    }
}

template <typename E> __global__ void k_fill(E *y, int64_t n, E pat, int64_t C, int64_t k)
{
    GRID_LOOP(i, n) { y[i] = (C <= 0 || i % C == i / C + k) ? pat : (E)0; }
}

} // namespace

#define DISPATCH_IDX(dt, CALL)                                                                                      \
    switch (dt) {                                                                                                   \
    case 1: { typedef float I; CALL; } break;                                                                       \
    case 2: { typedef double I; CALL; } break;                                                                      \
    case 3: { typedef __half I; CALL; } break;                                                                      \
    case 4: { typedef bf16s I; CALL; } break;                                                                       \
    case 5: { typedef int8_t I; CALL; } break;                                                                      \
    case 6: { typedef uint8_t I; CALL; } break;                                                                     \
    case 7: { typedef int16_t I; CALL; } break;                                                                     \
    case 8: { typedef int32_t I; CALL; } break;                                                                     \
    case 9: { typedef int64_t I; CALL; } break;                                                                     \
    default: return (int)cudaErrorInvalidValue;                                                                     \
    }

static strides8 to8(const int64_t *v, int n)
{
    strides8 r;
    for (int i = 0; i < CUK_MAX_RANK; i++) r.v[i] = i < n ? v[i] : 0;
    return r;
}

extern "C" {

int cuk_onehot(cudaStream_t s, int esize, int idt, const void *idx, const void *vals, void *y, int64_t n, int64_t depth,
               int64_t inner)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, DISPATCH_IDX(idt, (k_onehot<I, T><<<blocks_for(n), THREADS, 0, s>>>((const I *)idx, (const T *)vals,
                                                                                          (T *)y, n, depth, inner))));
    return last_error();
}

int cuk_gathernd(cudaStream_t s, int esize, const void *x, const void *idx, int i64, void *y, int64_t n,
                 const cuk_dims *nd, int64_t slice, int64_t per_batch, int64_t batch_elems, cuk_err *err,
                 unsigned long long site)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_gathernd<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, idx, i64, (T *)y, n, *nd, slice,
                                                                          per_batch, batch_elems, err, site)));
    return last_error();
}

int cuk_scatternd(cudaStream_t s, int dtype, void *y, const void *u, const void *idx, int i64, const cuk_dims *nd,
                  int64_t slice, int64_t ntup, unsigned *bm, int64_t targets, int red, cuk_err *err,
                  unsigned long long site)
{
    if (ntup <= 0) return 0;
    int64_t n = slice * ntup;
    if (n <= 0) bm = nullptr;
    if (bm && cudaMemsetAsync(bm, 0, cuk_scatter_bitmap_bytes(targets), s) != cudaSuccess) return last_error();
    k_scatternd_check<<<blocks_for(ntup), THREADS, 0, s>>>(idx, i64, *nd, slice, ntup, bm, err, site);
    if (!bm) return last_error();
    DISPATCH(dtype, (k_scatternd<T><<<blocks_for(n), THREADS, 0, s>>>((T *)y, (const T *)u, idx, i64, *nd, slice, ntup,
                                                                      bm, red, n)));
    return last_error();
}

int cuk_gather_el(cudaStream_t s, int esize, const void *x, const void *idx, int i64, void *y, int64_t n,
                  const cuk_dims *id, const int64_t *xs, int ax, int64_t D, cuk_err *err, unsigned long long site)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_gather_el<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, idx, i64, (T *)y, n, *id,
                                                                           to8(xs, id->n), ax, D, err, site)));
    return last_error();
}

int cuk_scatter_el(cudaStream_t s, int dtype, void *y, const void *u, const void *idx, int i64, int64_t n,
                   const cuk_dims *id, const int64_t *ys, int ax, int64_t D, unsigned *bm, int64_t targets, int red,
                   cuk_err *err, unsigned long long site)
{
    if (n <= 0) return 0;
    if (cudaMemsetAsync(bm, 0, cuk_scatter_bitmap_bytes(targets), s) != cudaSuccess) return last_error();
    strides8 st = to8(ys, id->n);
    k_scatter_el_check<<<blocks_for(n), THREADS, 0, s>>>(idx, i64, n, *id, st, ax, D, bm, err, site);
    DISPATCH(dtype, (k_scatter_el<T><<<blocks_for(n), THREADS, 0, s>>>((T *)y, (const T *)u, idx, i64, n, *id, st, ax,
                                                                       D, bm, red)));
    return last_error();
}

size_t cuk_scatter_bitmap_bytes(int64_t targets)
{
    return sizeof(unsigned) * (size_t)(1 + (targets + 31) / 32);
}

int cuk_trilu(cudaStream_t s, int esize, const void *x, void *y, int64_t n, int64_t R, int64_t C, int64_t k, int upper)
{
    if (n <= 0 || R <= 0 || C <= 0) return 0;
    DISPATCH_SIZE(esize, (k_trilu<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, n, R, C, k, upper)));
    return last_error();
}

int cuk_cumsum(cudaStream_t s, int dtype, const void *x, void *y, int64_t n, int64_t D, int64_t inner, int excl, int rev,
               int prod)
{
    if (n <= 0 || D <= 0 || inner <= 0) return 0;
    int64_t lines = n / D;
    DISPATCH(dtype, (k_cumsum<T><<<blocks_for(lines), THREADS, 0, s>>>((const T *)x, (T *)y, lines, D, inner, excl, rev,
                                                                       prod)));
    return last_error();
}

int cuk_revseq(cudaStream_t s, int esize, const void *x, const void *lens, int i64, void *y, int64_t n, int ba, int64_t B,
               int64_t steps, int64_t blk, cuk_err *err, unsigned long long site)
{
    if (B <= 0) return 0;
    k_revseq_check<<<blocks_for(B), THREADS, 0, s>>>(lens, i64, B, steps, err, site);
    if (n <= 0 || blk <= 0 || steps <= 0) return last_error();
    DISPATCH_SIZE(esize, (k_revseq<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, lens, i64, (T *)y, n, ba, B, steps,
                                                                        blk)));
    return last_error();
}

int cuk_range_check(cudaStream_t s, const void *v, int i64, int64_t n, int64_t lo, int64_t hi, int64_t shown,
                    cuk_err *err, unsigned long long site)
{
    if (n <= 0) return 0;
    k_range_check<<<blocks_for(n), THREADS, 0, s>>>(v, i64, n, lo, hi, shown, err, site);
    return last_error();
}

int cuk_fill(cudaStream_t s, int esize, void *y, int64_t n, uint64_t pattern, int64_t C, int64_t k)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_fill<T><<<blocks_for(n), THREADS, 0, s>>>((T *)y, n, (T)pattern, C, k)));
    return last_error();
}

} // extern "C"
