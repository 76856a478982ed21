/*
 * weft's CUDA emulator (tests/cudaemu): what cudaemu_runtime.cc lends cudaemu_nvrtc.cc (the emulator's
 * lock and error state, its diagnostics and the real dlopen). Private to the emulator's own sources.
 */
#ifndef WF_CUDAEMU_IMPL_H
#define WF_CUDAEMU_IMPL_H

#include "cuda_runtime.h"

#define CUEMU_HIDDEN __attribute__((visibility("hidden")))

/* The emulator's one lock (every emulated operation holds it); the first call initialises the emulator. */
CUEMU_HIDDEN void cuemu__lock(void);
CUEMU_HIDDEN void cuemu__unlock(void);
/* Records e as the calling thread's last error (cudaGetLastError) unless it is cudaSuccess; returns e. */
CUEMU_HIDDEN cudaError_t cuemu__fail(cudaError_t e);
/* Under the lock: what any call returns before doing its work (no device, or the sticky error). */
CUEMU_HIDDEN cudaError_t cuemu__context_error(void);
/* "cudaemu: ..." on stderr unless WEFT_CUDAEMU_QUIET=1. */
CUEMU_HIDDEN void cuemu__diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The C library's dlopen, past the emulator's own (which hides cuDNN from the plugin). */
CUEMU_HIDDEN void *cuemu__real_dlopen(const char *file, int mode);

#endif
