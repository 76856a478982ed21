/*
 * The boundary between the CUDA host file of the resampling, signal and contraction ops (cuda_image.c:
 * Resize, GridSample, AffineGrid, RoiAlign, Col2Im, CenterCropPad, DFT, the windows, Einsum) and their
 * device code (cuda_kernels_image.cu): plain C launchers that enqueue one kernel and return its launch
 * error (cudaSuccess = 0). Pointers are device addresses of element 0; dtypes are wf_dtype values. Like
 * the CPU kernels, arithmetic runs in double and each value is converted to its dtype once at the end.
 */
#ifndef WF_CUDA_IMAGE_H
#define WF_CUDA_IMAGE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = x[i] as a double, for n elements of a numeric dtype. */
int cuki_widen(cudaStream_t s, int dtype, const void *x, double *y, int64_t n);
/* y[i] = x[i] converted as the CPU's wf__store_f64 does (integers truncate toward zero, NaN -> 0). */
int cuki_narrow(cudaStream_t s, int dtype, const double *x, void *y, int64_t n);
/* One separable Resize pass over an axis: dst[o, p, i] = sum_t w[p, t] * src[o, idx[p, t], i] (or extrap
 * where ext[p]), for `total` = outer * out_len * inner outputs and n taps per position. */
int cuki_resize_pass(cudaStream_t s, const double *src, double *dst, const int64_t *idx, const double *w,
                     const uint8_t *ext, int64_t in_len, int64_t out_len, int64_t inner, int n, double extrap,
                     int64_t total);

/* GridSample geometry: C channels, npts output points per image, 1 to 3 spatial dims (dims), mode 0
 * nearest / 1 linear / 2 cubic, pad 0 zeros / 1 border / 2 reflection, align_corners, and single: the
 * grid was not f64 (the reference denormalises in f32 then). */
typedef struct cuki_gs {
    int64_t C, npts, dims[3];
    int nsp, mode, pad, ac, single;
} cuki_gs;
/* y [N, C, out spatial...] from x (float dtype) and the grid widened to double, n outputs. */
int cuki_grid_sample(cudaStream_t s, int dtype, const void *x, const double *grid, void *y, int64_t n,
                     const cuki_gs *g);
/* AffineGrid: y [N, spatial..., nsp] from theta [N, nsp, nsp + 1] over sizes sz[0..nsp), n outputs. */
int cuki_affine_grid(cudaStream_t s, int dtype, const void *theta, void *y, int64_t n, int64_t npts, int nsp,
                     const int64_t *sz, int ac);

/* RoiAlign geometry. */
typedef struct cuki_roi {
    int64_t N, C, H, W, oh, ow, sr;
    double scale;
    int half, is_max;
} cuki_roi;
/* y [R, C, oh, ow] from x [N, C, H, W], rois [R, 4] (x's dtype) and batch indices bi (i64 when bi64,
 * else i32; clamped into [0, N), the caller checks them with cuk_range_check). */
int cuki_roi_align(cudaStream_t s, int dtype, const void *x, const void *rois, const void *bi, int bi64, void *y,
                   int64_t n, const cuki_roi *p);

/* Col2Im geometry per spatial dim: image dims, block dims, blocks per dim, strides, leading pads,
 * dilations; n dims, isz image elements, bsz block elements, L blocks. */
typedef struct cuki_c2i {
    int64_t img[8], blk[8], nblk[8], st[8], pad[8], dil[8];
    int64_t isz, bsz, L;
    int n;
} cuki_c2i;
int cuki_col2im(cudaStream_t s, int dtype, const void *x, void *y, int64_t total, const cuki_c2i *p);

/* CenterCropPad: output dims od, input dims id, input strides ist, shift (input = output + shift);
 * outside the input, zero bytes. */
typedef struct cuki_ccp {
    int64_t od[8], id[8], ist[8], shift[8];
    int rank;
} cuki_ccp;
int cuki_center_crop_pad(cudaStream_t s, int esize, const void *x, void *y, int64_t n, const cuki_ccp *p);

/* DFT along an axis of nin samples, length L, olen outputs per signal, inner elements after the axis,
 * ic input components (1 real, 2 complex); tw holds e^{i 2 pi m / L} for m < L as (cos, sin). inv_one:
 * inverse of a onesided spectrum (real output). n: outer * olen * inner signals' outputs. */
int cuki_dft(cudaStream_t s, int dtype, const void *x, const double *tw, void *y, int64_t n, int64_t nin, int64_t L,
             int64_t olen, int64_t inner, int64_t ic, int inv, int one);
/* Hann (kind 0), Hamming (1) or Blackman (2) window of n values of dtype, over the period N1. */
int cuki_window(cudaStream_t s, int dtype, void *y, int64_t n, double N1, int kind);

/* Einsum over a plan in device memory of np int64 values: out rank, summed labels ns, operands n; the
 * out dims; each operand's stride per out dim; the summed dims; each operand's stride per summed
 * label; each operand's device address. ny outputs of dtype. */
int cuki_einsum(cudaStream_t s, int dtype, const int64_t *plan, int64_t np, void *y, int64_t ny);

#ifdef __cplusplus
}
#endif

#endif
