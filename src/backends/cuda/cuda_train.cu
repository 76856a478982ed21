/*
 * Device code of the CUDA training ops (cuda_train.c): ApplyAdam with every operation through a
 * round-to-nearest intrinsic, which nvcc never contracts into an FMA, so each rounds once as on the CPU;
 * and StatelessRandomUniform through the counter hash of ops/kutil_random.h, bit-identical to the CPU.
 */
#include "cuda_dev.cuh"
#include "cuda_train.h"

namespace {

__device__ __forceinline__ float r_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float r_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float r_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float r_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float r_sqrt(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double r_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double r_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double r_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double r_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ double r_sqrt(double a) { return __dsqrt_rn(a); }

template <typename T>
__global__ void k_adam(const T *w, const T *m, const T *v, const T *g, const T *plr, const T *pb1, const T *pb2,
                       const T *peps, T *wn, T *mn, T *vn, int64_t n)
{
    T lr = *plr, b1 = *pb1, b2 = *pb2, eps = *peps;
    GRID_LOOP(i, n) {
        T gi = g[i], mi = m[i], vi = v[i], wi = w[i];
        T m2 = r_add(mi, r_mul(r_sub(gi, mi), b1));
        T v2 = r_add(vi, r_mul(r_sub(r_mul(gi, gi), vi), b2));
        T st = r_div(r_mul(m2, lr), r_add(r_sqrt(v2), eps));
        mn[i] = m2;
        vn[i] = v2;
        wn[i] = r_sub(wi, st);
    }
}

/* kutil_random.h's hash; the constants must stay equal to it */
__device__ __forceinline__ uint64_t rng_bits(uint64_t key, uint64_t i)
{
    uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ float rng_f32(uint64_t b) { return __fmul_rn((float)(uint32_t)(b >> 40), 0x1.0p-24f); }

/* which: 1 f32, 2 f64, 3 f16 bits, 4 bf16 bits (both rounded toward zero, so no value reaches 1) */
__global__ void k_rng(void *y, int which, int64_t n, uint64_t key)
{
    GRID_LOOP(i, n) {
        uint64_t b = rng_bits(key, (uint64_t)i);
        if (which == 2) {
            ((double *)y)[i] = __dmul_rn((double)(b >> 11), 0x1.0p-53);
            continue;
        }
        float f = rng_f32(b);
        if (which == 1) {
            ((float *)y)[i] = f;
        } else if (which == 3) {
            uint32_t u = __float_as_uint(f);
            ((uint16_t *)y)[i] = f < 0x1.0p-14f ? (uint16_t)__fmul_rz(f, 0x1.0p24f)
                                                : (uint16_t)(((((u >> 23) & 0xffu) - 112u) << 10) | ((u >> 13) & 0x3ffu));
        } else {
            ((uint16_t *)y)[i] = (uint16_t)(__float_as_uint(f) >> 16);
        }
    }
}

} // namespace

extern "C" int cuk_apply_adam(cudaStream_t s, int dtype, const void *w, const void *m, const void *v, const void *g,
                              const void *lr, const void *b1, const void *b2, const void *eps, void *wn, void *mn,
                              void *vn, int64_t n)
{
    if (n <= 0) return 0;
    if (dtype == 1)
        k_adam<float><<<blocks_for(n), THREADS, 0, s>>>((const float *)w, (const float *)m, (const float *)v,
                                                        (const float *)g, (const float *)lr, (const float *)b1,
                                                        (const float *)b2, (const float *)eps, (float *)wn,
                                                        (float *)mn, (float *)vn, n);
    else if (dtype == 2)
        k_adam<double><<<blocks_for(n), THREADS, 0, s>>>((const double *)w, (const double *)m, (const double *)v,
                                                         (const double *)g, (const double *)lr, (const double *)b1,
                                                         (const double *)b2, (const double *)eps, (double *)wn,
                                                         (double *)mn, (double *)vn, n);
    else
        return (int)cudaErrorInvalidValue;
    return last_error();
}

extern "C" int cuk_random_uniform(cudaStream_t s, int dtype, void *y, int64_t n, uint64_t key)
{
    if (n <= 0) return 0;
    if (dtype < 1 || dtype > 4) return (int)cudaErrorInvalidValue;
    k_rng<<<blocks_for(n), THREADS, 0, s>>>(y, dtype, n, key);
    return last_error();
}
