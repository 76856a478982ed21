/*
 * The boundary between the CUDA host file of the image conversions and random augmentations
 * (cuda_image_augment.c: ConvertImageDtype, StatelessRandomBrightness / Contrast / FlipLeftRight / Crop)
 * and their device code (cuda_image_augment.cu): plain C launchers that enqueue their kernels and return
 * the launch error (cudaSuccess = 0). Pointers are device addresses of element 0; dtypes are wf_dtype
 * values. The per-image draws are made on the host and passed in as device tables, one entry per image.
 */
#ifndef WF_CUDA_IMAGE_AUGMENT_H
#define WF_CUDA_IMAGE_AUGMENT_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ConvertImageDtype of n elements from dtype `from` to `to` (u8, f32, f64, f16, bf16; not the same). */
int cuia_convert(cudaStream_t s, int from, int to, const void *x, void *y, int64_t n);
/* Brightness over n elements of dtype (u8, f32, f64), `per` elements per image, delta[image]. */
int cuia_brightness(cudaStream_t s, int dtype, const void *x, void *y, const double *delta, int64_t per, int64_t n);
/* Contrast over n_img images of hw pixels and c channels: two kernels, the mean of each (image, channel)
 * into mean[n_img * c] (scratch), then the output with factor[image]. */
int cuia_contrast(cudaStream_t s, int dtype, const void *x, void *y, double *mean, const double *factor, int64_t hw,
                  int64_t c, int64_t n_img);
/* Left-right flip of the images whose flip[image] is set: n elements of esize bytes, images [h, w, c]. */
int cuia_flip(cudaStream_t s, int esize, const void *x, void *y, const uint8_t *flip, int64_t h, int64_t w, int64_t c,
              int64_t n);
/* Crops [h, w, c] of images [H, W, C] at off[3 * image ..] (row, column, channel): n output elements. */
typedef struct cuia_crop_geom {
    int64_t H, W, C, h, w, c;
} cuia_crop_geom;
int cuia_crop(cudaStream_t s, int esize, const void *x, void *y, const int64_t *off, cuia_crop_geom g, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
