/*
 * The boundary between the CUDA training-op host file (cuda_train.c) and its device code (cuda_train.cu):
 * plain C launchers that enqueue one kernel and return its launch error (cudaSuccess = 0). Pointers are
 * device addresses of element 0; dtypes are wf_dtype values.
 */
#ifndef WF_CUDA_TRAIN_H
#define WF_CUDA_TRAIN_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ApplyAdam over n elements of f32 (dtype 1) or f64 (2); lr, b1, b2 and eps point at one element each. */
int cuk_apply_adam(cudaStream_t s, int dtype, const void *w, const void *m, const void *v, const void *g,
                   const void *lr, const void *b1, const void *b2, const void *eps, void *wn, void *mn, void *vn,
                   int64_t n);
/* StatelessRandomUniform: n values of dtype (f32, f64, f16, bf16) from the key of ops/kutil_random.h. */
int cuk_random_uniform(cudaStream_t s, int dtype, void *y, int64_t n, uint64_t key);

#ifdef __cplusplus
}
#endif

#endif
