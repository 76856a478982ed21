/*
 * weft's CUDA emulator (tests/cudaemu): what device code (.cu files, compiled as C++ by g++ after
 * tests/cudaemu/rewrite_cu.py has turned each `k<<<grid, block, shmem, stream>>>(args)` into a call of
 * __cuemu_launch) needs: the CUDA qualifiers, the built-in index variables that the emulator's scheduler
 * sets, barriers and warp collectives (threads of a block are coroutines that switch at each of them),
 * atomics (plain operations: a block's threads never run at the same time) and the common intrinsics.
 */
#ifndef WF_CUDAEMU_DEVICE_H
#define WF_CUDAEMU_DEVICE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ static /* per block: blocks run one after the other */
#define __constant__ static
#define __managed__
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __grid_constant__

/* uint3 and dim3 are in cuda_runtime_api.h, as the toolkit's vector_types.h is in its runtime header */
static const int warpSize = 32;

/* dynamic shared memory (`extern __shared__ T s[];` is rewritten to a pointer to this) */
#define CUEMU_DYNSMEM_MAX (227 * 1024)

/* What a module compiled at run time by the emulator's NVRTC (tests/cudaemu/cudaemu_nvrtc.cc, built
 * with __CUEMU_MODULE defined) reaches the scheduler through: the emulator hands this table to the
 * module when it loads it, so a module links to no emulator symbol at all. That works wherever the
 * emulator lives (an executable without -rdynamic, a plugin with hidden symbols that was dlopen'ed
 * RTLD_LOCAL) and in any process, without promoting the plugin to the global symbol scope, where its
 * exported names could interpose on libraries loaded after it. A layout change bumps the version, and
 * modules of another version (an older disk cache) are refused at load. */
#define CUEMU_MODULE_API_VERSION 1
struct __cuemu_module_api {
    unsigned version, size;
    uint3 *thread_idx, *block_idx;
    dim3 *block_dim, *grid_dim;
    unsigned char *dynsmem;
    void (*syncthreads)(void);
    int (*syncthreads_count)(int);
    int (*syncthreads_and)(int);
    int (*syncthreads_or)(int);
    void (*syncwarp)(unsigned);
    unsigned (*activemask)(void);
    unsigned (*ballot_sync)(unsigned, int);
    void (*shfl)(const void *, void *, size_t, int, int, int);
    void (*trap)(const char *);
    int (*launch_begin)(const char *, const char *, int, dim3, dim3, size_t, cudaStream_t);
    void (*check_arg)(int, const char *, int, const void *);
    void (*launch_fail)(const char *, cudaError_t);
    cudaError_t (*run)(void (*)(void *), void *);
};
/* a module's kernels as its __cuemu_module_bind lists them (ended by a null name); each entry launches
 * its kernel with args[i] pointing at argument i, as cudaLaunchKernel's args */
typedef cudaError_t (*__cuemu_entry_fn)(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                                        void **args);
struct __cuemu_module_kernel {
    const char *name;
    __cuemu_entry_fn entry;
};

#ifdef __CUEMU_MODULE
extern "C" const struct __cuemu_module_api *__cuemu_api; /* set by __cuemu_module_bind */
#define threadIdx (*__cuemu_api->thread_idx)
#define blockIdx (*__cuemu_api->block_idx)
#define blockDim (*__cuemu_api->block_dim)
#define gridDim (*__cuemu_api->grid_dim)
#define __cuemu_dynsmem (__cuemu_api->dynsmem)
static inline void __syncthreads(void) { __cuemu_api->syncthreads(); }
static inline int __syncthreads_count(int pred) { return __cuemu_api->syncthreads_count(pred); }
static inline int __syncthreads_and(int pred) { return __cuemu_api->syncthreads_and(pred); }
static inline int __syncthreads_or(int pred) { return __cuemu_api->syncthreads_or(pred); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { __cuemu_api->syncwarp(mask); }
static inline unsigned __activemask(void) { return __cuemu_api->activemask(); }
static inline unsigned __ballot_sync(unsigned mask, int pred) { return __cuemu_api->ballot_sync(mask, pred); }
static inline void __cuemu_shfl(const void *in, void *out, size_t size, int mode, int arg, int width)
{
    __cuemu_api->shfl(in, out, size, mode, arg, width);
}
[[noreturn]] static inline void __cuemu_trap(const char *why)
{
    __cuemu_api->trap(why);
    __builtin_unreachable();
}
static inline int __cuemu_launch_begin(const char *kernel, const char *file, int line, dim3 grid, dim3 block,
                                       size_t shmem, cudaStream_t stream)
{
    return __cuemu_api->launch_begin(kernel, file, line, grid, block, shmem, stream);
}
static inline void __cuemu_check_arg(int launch_ok, const char *kernel, int index, const void *p)
{
    __cuemu_api->check_arg(launch_ok, kernel, index, p);
}
static inline void __cuemu_launch_fail(const char *why, cudaError_t e) { __cuemu_api->launch_fail(why, e); }
static inline cudaError_t __cuemu_run(void (*thunk)(void *), void *ctx) { return __cuemu_api->run(thunk, ctx); }
#else
/* set by the scheduler before it resumes a thread */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
extern unsigned char __cuemu_dynsmem[];

/* ---- the scheduler's entry points (cudaemu_runtime.cc) ---- */
void __syncthreads(void);
int __syncthreads_count(int pred);
int __syncthreads_and(int pred);
int __syncthreads_or(int pred);
void __syncwarp(unsigned mask = 0xffffffffu);
unsigned __activemask(void);
unsigned __ballot_sync(unsigned mask, int pred);
/* mode 0 idx, 1 up, 2 down, 3 xor; the value's bits travel as two 64-bit words */
void __cuemu_shfl(const void *in, void *out, size_t size, int mode, int arg, int width);
[[noreturn]] void __cuemu_trap(const char *why);
/* Takes the emulator's lock (__cuemu_run releases it) and checks the configuration; 0 if the launch
 * already failed. */
int __cuemu_launch_begin(const char *kernel, const char *file, int line, dim3 grid, dim3 block, size_t shmem,
                         cudaStream_t stream);
void __cuemu_check_arg(int launch_ok, const char *kernel, int index, const void *p);
/* Between begin and run: the launch fails with e (unless it failed already), and why is reported. */
void __cuemu_launch_fail(const char *why, cudaError_t e);
cudaError_t __cuemu_run(void (*thunk)(void *), void *ctx);
#endif

static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, !pred) == 0; }

template <typename T> static inline T __cuemu_shfl_t(T v, int mode, int arg, int width)
{
    static_assert(sizeof(T) <= 16 && std::is_trivially_copyable<T>::value, "shuffle of a large or non-trivial type");
    T r;
    __cuemu_shfl(&v, &r, sizeof(T), mode, arg, width);
    return r;
}
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    return __cuemu_shfl_t(v, 0, src, width);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    return __cuemu_shfl_t(v, 1, (int)delta, width);
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    return __cuemu_shfl_t(v, 2, (int)delta, width);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    return __cuemu_shfl_t(v, 3, lane_mask, width);
}

static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}
static inline void __threadfence_system(void) {}
static inline void __nanosleep(unsigned) {}
[[noreturn]] static inline void __trap(void) { __cuemu_trap("__trap() in device code"); }
static inline long long clock64(void) { static long long t; return ++t; }

/* ---- atomics: plain read-modify-writes returning the old value ---- */
template <typename T, typename V> static inline T atomicAdd(T *p, V v) { T o = *p; *p = (T)(o + (T)v); return o; }
template <typename T, typename V> static inline T atomicSub(T *p, V v) { T o = *p; *p = (T)(o - (T)v); return o; }
template <typename T, typename V> static inline T atomicExch(T *p, V v) { T o = *p; *p = (T)v; return o; }
template <typename T, typename V> static inline T atomicMax(T *p, V v) { T o = *p; if ((T)v > o) *p = (T)v; return o; }
template <typename T, typename V> static inline T atomicMin(T *p, V v) { T o = *p; if ((T)v < o) *p = (T)v; return o; }
template <typename T, typename V> static inline T atomicAnd(T *p, V v) { T o = *p; *p = o & (T)v; return o; }
template <typename T, typename V> static inline T atomicOr(T *p, V v) { T o = *p; *p = o | (T)v; return o; }
template <typename T, typename V> static inline T atomicXor(T *p, V v) { T o = *p; *p = o ^ (T)v; return o; }
template <typename T, typename C, typename V> static inline T atomicCAS(T *p, C cmp, V v)
{
    T o = *p;
    if (o == (T)cmp) *p = (T)v;
    return o;
}
static inline unsigned atomicInc(unsigned *p, unsigned lim) { unsigned o = *p; *p = o >= lim ? 0 : o + 1; return o; }
static inline unsigned atomicDec(unsigned *p, unsigned lim) { unsigned o = *p; *p = (o == 0 || o > lim) ? lim : o - 1; return o; }
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin
#define atomicCAS_block atomicCAS
#define atomicExch_block atomicExch

/* ---- loads ---- */
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline T __ldca(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
template <typename T> static inline T __ldlu(const T *p) { return *p; }
template <typename T> static inline void __stcs(T *p, T v) { *p = v; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }

/* ---- min / max as CUDA's overloads: the usual arithmetic conversions of the two operands ---- */
template <typename A, typename B>
static inline typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value,
                                      typename std::common_type<A, B>::type>::type
min(A a, B b)
{
    typedef typename std::common_type<A, B>::type C;
    return (C)a < (C)b ? (C)a : (C)b;
}
template <typename A, typename B>
static inline typename std::enable_if<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value,
                                      typename std::common_type<A, B>::type>::type
max(A a, B b)
{
    typedef typename std::common_type<A, B>::type C;
    return (C)a > (C)b ? (C)a : (C)b;
}

/* ---- bit casts and integer intrinsics ---- */
template <typename D, typename S> static inline D __cuemu_bits(S s)
{
    static_assert(sizeof(D) == sizeof(S), "size");
    D d;
    memcpy(&d, &s, sizeof d);
    return d;
}
static inline unsigned __float_as_uint(float f) { return __cuemu_bits<unsigned>(f); }
static inline int __float_as_int(float f) { return __cuemu_bits<int>(f); }
static inline float __uint_as_float(unsigned u) { return __cuemu_bits<float>(u); }
static inline float __int_as_float(int i) { return __cuemu_bits<float>(i); }
static inline long long __double_as_longlong(double d) { return __cuemu_bits<long long>(d); }
static inline double __longlong_as_double(long long l) { return __cuemu_bits<double>(l); }
static inline int __double2hiint(double d) { return (int)(__cuemu_bits<unsigned long long>(d) >> 32); }
static inline int __double2loint(double d) { return (int)(__cuemu_bits<unsigned long long>(d) & 0xffffffffu); }
static inline double __hiloint2double(int hi, int lo)
{
    return __cuemu_bits<double>(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x)
{
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
static inline int __mul24(int a, int b) { return (int)(((long long)(a << 8 >> 8)) * (b << 8 >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

/* ---- float intrinsics: correctly rounded where CUDA's are, libm where CUDA's are approximate ---- */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
/* the product of two floats is exact in double: round that toward zero */
static inline float __fmul_rz(float a, float b)
{
    double p = (double)a * b;
    float f = (float)p;
    if (std::isfinite(p) && fabs((double)f) > fabs(p)) f = nextafterf(f, 0.0f);
    if (std::isinf(f) && !std::isinf(p)) f = copysignf(3.40282347e38f, f);
    return f;
}
static inline float __fdividef(float a, float b) { return a / b; }
/* glibc declares these names itself: macros (after its headers) keep them CUDA's */
#define __expf(x) expf(x)
#define __exp10f(x) powf(10.0f, (x))
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(a, b) powf((a), (b))
#define __sincosf(x, s, c) sincosf((x), (s), (c))
static inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float sinpif(float x) { return (float)sin(M_PI * (double)x); }
static inline float cospif(float x) { return (float)cos(M_PI * (double)x); }
static inline double sinpi(double x) { return sin(M_PI * x); }
static inline double cospi(double x) { return cos(M_PI * x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
/* inverse error function: Newton on erf from a rough start, in double */
static inline double erfinv(double y)
{
    if (y <= -1.0) return y == -1.0 ? -HUGE_VAL : NAN;
    if (y >= 1.0) return y == 1.0 ? HUGE_VAL : NAN;
    double w = -log((1.0 - y) * (1.0 + y)), x = copysign(sqrt(fmax(w - log(w > 0 ? w : 1.0), 0.0)) * 0.9, y);
    if (fabs(y) < 0.7) x = y * 0.886226925452758;
    for (int i = 0; i < 60; i++) {
        double e = erf(x) - y, d = 1.1283791670955126 * exp(-x * x);
        if (d == 0) break;
        double nx = x - e / d;
        if (nx == x) break;
        x = nx;
    }
    return x;
}
static inline float erfinvf(float y) { return (float)erfinv((double)y); }
static inline float erfcinvf(float y) { return (float)erfinv(1.0 - (double)y); }
static inline double erfcinv(double y) { return erfinv(1.0 - y); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline long long __float2ll_rn(float x) { return (long long)nearbyintf(x); }
static inline long long __float2ll_rz(float x) { return (long long)x; }
static inline int __double2int_rn(double x) { return (int)nearbyint(x); }
static inline long long __double2ll_rn(double x) { return (long long)nearbyint(x); }
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline double __ll2double_rn(long long x) { return (double)x; }

/* ---- launches ---- */
template <typename T> static inline void __cuemu_check_args_one(int ok, const char *k, int i, const T &a)
{
    if constexpr (std::is_pointer<T>::value) __cuemu_check_arg(ok, k, i, (const void *)a);
}

template <typename K, typename Tup> struct __cuemu_call {
    K fn;
    Tup *args;
    static void thunk(void *p)
    {
        __cuemu_call *c = (__cuemu_call *)p;
        std::apply(c->fn, *c->args); /* by-value kernel parameters: each thread gets its own copies */
    }
};

/* The launch once its arguments are in the parameter types: pointer arguments must be device (or pinned
 * host) addresses. */
template <typename K, typename Tup>
static inline cudaError_t __cuemu_launch_tuple(int ok, const char *name, K k, Tup &args)
{
    std::apply([&](const auto &...v) {
        int i = 0;
        (__cuemu_check_args_one(ok, name, i++, v), ...);
    }, args);
    __cuemu_call<K, Tup> c{k, &args};
    return __cuemu_run(&decltype(c)::thunk, &c);
}

/* k<<<grid, block, shmem, stream>>>(args...): the arguments are converted to the parameter types once,
 * as at a real launch. */
template <typename... P, typename... A>
static inline void __cuemu_launch(const char *name, const char *file, int line, dim3 grid, dim3 block, size_t shmem,
                                  cudaStream_t stream, void (*k)(P...), A &&...a)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    int ok = __cuemu_launch_begin(name, file, line, grid, block, shmem, stream);
    std::tuple<typename std::decay<P>::type...> args(std::forward<A>(a)...);
    __cuemu_launch_tuple(ok, name, k, args);
}

template <typename... P, size_t... I>
static inline cudaError_t __cuemu_launch_argv_(const char *name, const char *file, int line, dim3 grid, dim3 block,
                                               size_t shmem, cudaStream_t stream, void (*k)(P...), void **argv,
                                               std::index_sequence<I...>)
{
    int ok = __cuemu_launch_begin(name, file, line, grid, block, shmem, stream);
    if (sizeof...(P) && !argv) {
        __cuemu_launch_fail("args is NULL but the kernel has parameters", cudaErrorInvalidValue);
        return __cuemu_run(NULL, NULL);
    }
    std::tuple<typename std::decay<P>::type...> args(*(const typename std::decay<P>::type *)argv[I]...);
    return __cuemu_launch_tuple(ok, name, k, args);
}

/* cudaLaunchKernel(k, grid, block, argv, shmem, stream) of a run-time compiled kernel: argv[i] points at
 * argument i, typed as parameter i (what a module's entry point calls; the launch's error is returned,
 * as cudaLaunchKernel returns it). */
template <typename... P>
static inline cudaError_t __cuemu_launch_argv(const char *name, const char *file, int line, dim3 grid, dim3 block,
                                              size_t shmem, cudaStream_t stream, void (*k)(P...), void **argv)
{
    return __cuemu_launch_argv_(name, file, line, grid, block, shmem, stream, k, argv,
                                std::index_sequence_for<P...>{});
}

#endif
