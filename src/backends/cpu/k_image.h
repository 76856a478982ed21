/* What the CPU's image kernels share (k_image_io.c, k_image_augment.c). */
#ifndef WF_BACKENDS_CPU_K_IMAGE_H
#define WF_BACKENDS_CPU_K_IMAGE_H

#include "core/core.h"

/* u8 pixels a[0..n) to `to` (u8: a copy; a float dtype: times 1/255, as ConvertImageDtype and
 * TensorFlow's convert_image_dtype / decode_image(dtype=...) do). */
void wf__cpu_image_from_u8(const uint8_t *a, void *y, wf_dtype to, int64_t n);

#endif
