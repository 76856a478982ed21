/*
 * Device code of the CUDA image conversions and random augmentations (cuda_image_augment.c). Ports of
 * src/backends/cpu/k_image_augment.c: every product and sum through a round-to-nearest intrinsic, which
 * nvcc never contracts into an FMA, so each operation rounds once as on the CPU.
 */
#include "cuda_dev.cuh"
#include "cuda_image_augment.h"

namespace {

/* (float)(1.0 / 255.0) and 1.0 / 255.0, spelled exactly; 255.5 is exact in both */
#define U8F 0x1.010102p-8f
#define U8D 0x1.0101010101010p-8

__device__ __forceinline__ uint8_t sat_u8(float v) { return !(v > 0.0f) ? 0 : v >= 255.0f ? 255 : (uint8_t)v; }
__device__ __forceinline__ uint8_t sat_u8d(double v) { return !(v > 0.0) ? 0 : v >= 255.0 ? 255 : (uint8_t)v; }

template <typename T> constexpr bool is_u8 = std::is_same<T, uint8_t>::value;
template <typename T> constexpr bool is_f64 = std::is_same<T, double>::value;

/* u8 as the f32 in [0, 1] the arithmetic uses */
__device__ __forceinline__ float u8_f(uint8_t v) { return __fmul_rn((float)v, U8F); }

/* ---- ConvertImageDtype: u8 scales by 1/255 (in f32; f64 in double), floats to u8 by 255.5 with
 * saturation, floats to floats as Cast (f16 and bf16 through f32) -------------------------------------- */

template <typename S, typename D> __global__ void k_convert(const S *x, D *y, int64_t n)
{
    GRID_LOOP(i, n) {
        if constexpr (is_u8<S> && is_f64<D>) {
            y[i] = __dmul_rn((double)x[i], U8D);
        } else if constexpr (is_u8<S>) {
            tr<D>::st(y, i, (typename tr<D>::C)u8_f(x[i]));
        } else if constexpr (is_u8<D> && is_f64<S>) {
            y[i] = sat_u8d(__dmul_rn(x[i], 255.5));
        } else if constexpr (is_u8<D>) {
            y[i] = sat_u8(__fmul_rn((float)tr<S>::ld(x, i), 255.5f));
        } else {
            tr<D>::st(y, i, (typename tr<D>::C)tr<S>::ld(x, i));
        }
    }
}

template <typename S> int convert_from(cudaStream_t s, int to, const S *x, void *y, int64_t n)
{
    switch (to) {
    case 1: k_convert<S, float><<<blocks_for(n), THREADS, 0, s>>>(x, (float *)y, n); break;
    case 2: k_convert<S, double><<<blocks_for(n), THREADS, 0, s>>>(x, (double *)y, n); break;
    case 3: k_convert<S, __half><<<blocks_for(n), THREADS, 0, s>>>(x, (__half *)y, n); break;
    case 4: k_convert<S, bf16s><<<blocks_for(n), THREADS, 0, s>>>(x, (bf16s *)y, n); break;
    case 6: k_convert<S, uint8_t><<<blocks_for(n), THREADS, 0, s>>>(x, (uint8_t *)y, n); break;
    default: return (int)cudaErrorInvalidValue;
    }
    return last_error();
}

/* ---- StatelessRandomBrightness: x + delta (u8 in [0, 1] units, saturated back) ------------------------ */

template <typename T> __global__ void k_brightness(const T *x, T *y, const double *delta, int64_t per, int64_t n)
{
    GRID_LOOP(i, n) {
        double d = delta[i / per];
        if constexpr (is_f64<T>) {
            y[i] = __dadd_rn(x[i], d);
        } else if constexpr (is_u8<T>) {
            float v = __fadd_rn(u8_f(x[i]), (float)d);
            y[i] = sat_u8(__fmul_rn(v, 255.5f));
        } else {
            y[i] = __fadd_rn(x[i], (float)d);
        }
    }
}

/* ---- StatelessRandomContrast: (x - mean) * factor + mean per (image, channel) ------------------------- */

template <typename T> __device__ __forceinline__ double px_d(const T *x, int64_t e)
{
    if constexpr (is_u8<T>) return (double)u8_f(x[e]);
    else return (double)x[e];
}

/* One thread per (image, channel), summing in double in the CPU's order, so the mean is the CPU's. Slow
 * for few large images (a block reduction would be faster but rounds the f32 and f64 sums differently). */
template <typename T> __global__ void k_contrast_mean(const T *x, double *mean, int64_t hw, int64_t c, int64_t nc)
{
    GRID_LOOP(g, nc) {
        int64_t n = g / c, ch = g % c;
        double sum = 0;
        for (int64_t p = 0; p < hw; p++) sum = __dadd_rn(sum, px_d(x, (n * hw + p) * c + ch));
        mean[g] = hw ? __ddiv_rn(sum, (double)hw) : 0.0;
    }
}

template <typename T>
__global__ void k_contrast(const T *x, T *y, const double *mean, const double *factor, int64_t hw, int64_t c, int64_t n)
{
    GRID_LOOP(g, n) {
        int64_t im = g / (hw * c), ch = g % c;
        double m = mean[im * c + ch], f = factor[im];
        if constexpr (is_f64<T>) {
            y[g] = __dadd_rn(__dmul_rn(__dsub_rn(x[g], m), f), m);
        } else {
            float mf = (float)m, ff = (float)f;
            float v;
            if constexpr (is_u8<T>) v = u8_f(x[g]);
            else v = x[g];
            v = __fadd_rn(__fmul_rn(__fsub_rn(v, mf), ff), mf);
            if constexpr (is_u8<T>) y[g] = sat_u8(__fmul_rn(v, 255.5f));
            else y[g] = v;
        }
    }
}

/* ---- StatelessRandomFlipLeftRight and StatelessRandomCrop: element moves by size ---------------------- */

template <typename T>
__global__ void k_flip(const T *x, T *y, const uint8_t *flip, int64_t h, int64_t w, int64_t c, int64_t n)
{
    GRID_LOOP(g, n) {
        int64_t col = g / c % w, im = g / (c * w * h);
        y[g] = x[flip[im] ? g + (w - 1 - 2 * col) * c : g];
    }
}

template <typename T> __global__ void k_crop(const T *x, T *y, const int64_t *off, cuia_crop_geom G, int64_t n)
{
    GRID_LOOP(g, n) {
        int64_t ch = g % G.c, q = g / G.c, col = q % G.w;
        q /= G.w;
        int64_t r = q % G.h, im = q / G.h;
        const int64_t *o = off + 3 * im;
        y[g] = x[((im * G.H + o[0] + r) * G.W + o[1] + col) * G.C + o[2] + ch];
    }
}

#define DISPATCH_IMG_(dt, CALL)                                                                                    \
    switch (dt) {                                                                                                  \
    case 1: { typedef float T; CALL; } break;                                                                      \
    case 2: { typedef double T; CALL; } break;                                                                     \
    case 6: { typedef uint8_t T; CALL; } break;                                                                    \
    default: return (int)cudaErrorInvalidValue;                                                                   \
    }

} // namespace

extern "C" {

int cuia_convert(cudaStream_t s, int from, int to, const void *x, void *y, int64_t n)
{
    if (n <= 0) return 0;
    switch (from) {
    case 1: return convert_from(s, to, (const float *)x, y, n);
    case 2: return convert_from(s, to, (const double *)x, y, n);
    case 3: return convert_from(s, to, (const __half *)x, y, n);
    case 4: return convert_from(s, to, (const bf16s *)x, y, n);
    case 6: return convert_from(s, to, (const uint8_t *)x, y, n);
    default: return (int)cudaErrorInvalidValue;
    }
}

int cuia_brightness(cudaStream_t s, int dtype, const void *x, void *y, const double *delta, int64_t per, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_IMG_(dtype, (k_brightness<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, delta, per, n)));
    return last_error();
}

int cuia_contrast(cudaStream_t s, int dtype, const void *x, void *y, double *mean, const double *factor, int64_t hw,
                  int64_t c, int64_t n_img)
{
    int64_t nc = n_img * c, n = nc * hw;
    if (n <= 0) return 0;
    DISPATCH_IMG_(dtype, (k_contrast_mean<T><<<blocks_for(nc), THREADS, 0, s>>>((const T *)x, mean, hw, c, nc)));
    int rc = last_error();
    if (rc) return rc;
    DISPATCH_IMG_(dtype, (k_contrast<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, mean, factor, hw, c,
                                                                          n)));
    return last_error();
}

int cuia_flip(cudaStream_t s, int esize, const void *x, void *y, const uint8_t *flip, int64_t h, int64_t w, int64_t c,
              int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_flip<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, flip, h, w, c, n)));
    return last_error();
}

int cuia_crop(cudaStream_t s, int esize, const void *x, void *y, const int64_t *off, cuia_crop_geom g, int64_t n)
{
    if (n <= 0) return 0;
    DISPATCH_SIZE(esize, (k_crop<T><<<blocks_for(n), THREADS, 0, s>>>((const T *)x, (T *)y, off, g, n)));
    return last_error();
}

} // extern "C"
