/*
 * Device-side helpers shared by the CUDA backend's .cu files: storage/compute type traits per dtype
 * (f16/bf16 compute in f32, bool and bf16 as distinct storage types), integer limits, grid-stride
 * loops, broadcast walks, block reductions, NaN-aware max/min and the dtype dispatch macros.
 */
#ifndef WF_CUDA_DEV_CUH
#define WF_CUDA_DEV_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_kern.h"

namespace {

/* bf16 and bool as their own storage types, so that overloads and traits can tell them from u16/u8. */
struct bf16s {
    uint16_t v;
};
struct bools {
    uint8_t v;
};

enum { K_FLT, K_SINT, K_UINT, K_BOOL };

template <typename S> struct tr;
#define TR_PLAIN_(T, KIND)                                                                                         \
    template <> struct tr<T> {                                                                                     \
        typedef T C;                                                                                               \
        static const int kind = KIND;                                                                              \
        static __device__ __forceinline__ C ld(const T *p, int64_t i) { return p[i]; }                             \
        static __device__ __forceinline__ void st(T *p, int64_t i, C v) { p[i] = v; }                              \
    };
TR_PLAIN_(float, K_FLT)
TR_PLAIN_(double, K_FLT)
TR_PLAIN_(int8_t, K_SINT)
TR_PLAIN_(int16_t, K_SINT)
TR_PLAIN_(int32_t, K_SINT)
TR_PLAIN_(int64_t, K_SINT)
TR_PLAIN_(uint8_t, K_UINT)
#undef TR_PLAIN_

template <> struct tr<__half> {
    typedef float C;
    static const int kind = K_FLT;
    static __device__ __forceinline__ float ld(const __half *p, int64_t i) { return __half2float(p[i]); }
    static __device__ __forceinline__ void st(__half *p, int64_t i, float v) { p[i] = __float2half_rn(v); }
};

/* the CPU's rounding: nearest-even, NaN kept quiet with its sign */
__device__ __forceinline__ uint16_t bf_round(float f)
{
    uint32_t u = __float_as_uint(f);
    return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)
                                           : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

template <> struct tr<bf16s> {
    typedef float C;
    static const int kind = K_FLT;
    static __device__ __forceinline__ float ld(const bf16s *p, int64_t i) { return __uint_as_float((uint32_t)p[i].v << 16); }
    static __device__ __forceinline__ void st(bf16s *p, int64_t i, float v) { p[i].v = bf_round(v); }
};

template <> struct tr<bools> {
    typedef uint8_t C;
    static const int kind = K_BOOL;
    static __device__ __forceinline__ uint8_t ld(const bools *p, int64_t i) { return p[i].v; }
    static __device__ __forceinline__ void st(bools *p, int64_t i, uint8_t v) { p[i].v = v != 0; }
};

/* integer limits as plain constants: std::numeric_limits is host-only in device code */
template <typename T> struct lim;
#define LIM_(T, LO, HI)                                                                                            \
    template <> struct lim<T> {                                                                                    \
        static constexpr T lo = LO, hi = HI;                                                                       \
    };
LIM_(int8_t, INT8_MIN, INT8_MAX)
LIM_(uint8_t, 0, UINT8_MAX)
LIM_(int16_t, INT16_MIN, INT16_MAX)
LIM_(int32_t, INT32_MIN, INT32_MAX)
LIM_(int64_t, INT64_MIN, INT64_MAX)
#undef LIM_

const int THREADS = 256;

inline unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b > (1 << 20) ? (1 << 20) : b); /* grid-stride loops cover the rest */
}

/* Reports a bad index to the device's error record: the first report wins (see cuk_err). */
__device__ __forceinline__ void cuk_flag(cuk_err *e, unsigned long long site, int64_t v, int64_t pos, int64_t entry)
{
    if (atomicCAS(&e->site, 0ull, site) == 0ull) {
        e->value = v;
        e->pos = pos;
        e->entry = entry;
    }
}

#define GRID_LOOP(i, n)                                                                                            \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* Element offsets of linear output index i in the first `n` operands of walk w. */
__device__ __forceinline__ void walk_offs(const cuk_walk &w, int64_t i, int n, int64_t *o)
{
    o[0] = o[1] = o[2] = 0;
    if (w.rank == 1) {
        for (int k = 0; k < n; k++) o[k] = i * w.st[k][0];
        return;
    }
    if (w.small) {
        uint32_t r = (uint32_t)i;
        for (int d = w.rank - 1; d >= 0; d--) {
            uint32_t nd = (uint32_t)w.dims[d], c = r % nd;
            r /= nd;
            for (int k = 0; k < n; k++) o[k] += (int64_t)c * w.st[k][d];
        }
    } else {
        uint64_t r = (uint64_t)i;
        for (int d = w.rank - 1; d >= 0; d--) {
            uint64_t nd = (uint64_t)w.dims[d], c = r % nd;
            r /= nd;
            for (int k = 0; k < n; k++) o[k] += (int64_t)c * w.st[k][d];
        }
    }
}

template <typename C> __device__ __forceinline__ bool is_nan(C v) { return v != v; }

/* Tree reduction of one value per thread of the block; every thread gets the result. */
template <typename A, typename F> __device__ A block_reduce(A v, F combine)
{
    __shared__ A buf[THREADS];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) buf[threadIdx.x] = combine(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    A r = buf[0];
    __syncthreads(); /* buf is reused by the next call */
    return r;
}

/* max with NaN winning, as the CPU */
template <typename C> __device__ __forceinline__ C max_nan(C a, C b) { return (b > a || is_nan(b)) ? b : a; }
template <typename C> __device__ __forceinline__ C min_nan(C a, C b) { return (b < a || is_nan(b)) ? b : a; }

/* Element i of p as a double (the CPU kernels that widen to f64). */
template <typename T> __device__ __forceinline__ double ld_d(const T *p, int64_t i) { return (double)tr<T>::ld(p, i); }

/* the CPU's wf__store_f64: floats round once from double (f16 / bf16 through f32, as the CPU does);
 * integers truncate toward zero, saturate at the int64 range, then wrap; NaN becomes 0 */
template <typename T> __device__ __forceinline__ void st_d(T *p, int64_t i, double v)
{
    typedef typename tr<T>::C C;
    if constexpr (tr<T>::kind == K_FLT) {
        tr<T>::st(p, i, (C)v);
    } else {
        int64_t q = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
        tr<T>::st(p, i, (C)q);
    }
}

inline int last_error() { return (int)cudaGetLastError(); }

/* The case lists the dispatch macros share: the float dtypes (1-4) and the integers (5-9). */
#define DISPATCH_FLT_CASES_(CALL)                                                                                  \
    case 1: { typedef float T; CALL; } break;                                                                      \
    case 2: { typedef double T; CALL; } break;                                                                     \
    case 3: { typedef __half T; CALL; } break;                                                                     \
    case 4: { typedef bf16s T; CALL; } break;
#define DISPATCH_INT_CASES_(CALL)                                                                                  \
    case 5: { typedef int8_t T; CALL; } break;                                                                     \
    case 6: { typedef uint8_t T; CALL; } break;                                                                    \
    case 7: { typedef int16_t T; CALL; } break;                                                                    \
    case 8: { typedef int32_t T; CALL; } break;                                                                    \
    case 9: { typedef int64_t T; CALL; } break;

/* Calls F<T>() with T the storage type of dtype dt; unknown dtypes give cudaErrorInvalidValue. */
#define DISPATCH(dt, CALL)                                                                                         \
    switch (dt) {                                                                                                  \
    DISPATCH_FLT_CASES_(CALL)                                                                                      \
    DISPATCH_INT_CASES_(CALL)                                                                                      \
    case 10: { typedef bools T; CALL; } break;                                                                     \
    default: return (int)cudaErrorInvalidValue;                                                                    \
    }

/* numeric dtypes only (no bool) */
#define DISPATCH_NUM(dt, CALL)                                                                                     \
    switch (dt) {                                                                                                  \
    DISPATCH_FLT_CASES_(CALL)                                                                                      \
    DISPATCH_INT_CASES_(CALL)                                                                                      \
    default: return (int)cudaErrorInvalidValue;                                                                    \
    }

#define DISPATCH_FLT(dt, CALL)                                                                                     \
    switch (dt) {                                                                                                  \
    DISPATCH_FLT_CASES_(CALL)                                                                                      \
    default: return (int)cudaErrorInvalidValue;                                                                    \
    }

#define DISPATCH_SIZE(es, CALL)                                                                                    \
    switch (es) {                                                                                                  \
    case 1: { typedef uint8_t T; CALL; } break;                                                                    \
    case 2: { typedef uint16_t T; CALL; } break;                                                                   \
    case 4: { typedef uint32_t T; CALL; } break;                                                                   \
    case 8: { typedef uint64_t T; CALL; } break;                                                                   \
    default: return (int)cudaErrorInvalidValue;                                                                    \
    }

} // namespace

#endif
