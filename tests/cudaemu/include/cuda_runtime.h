/*
 * weft's CUDA emulator (tests/cudaemu): the runtime header that device code sees; in C++ it adds the
 * device-side emulation (qualifiers, built-in variables, intrinsics, launches) of cudaemu_device.h.
 */
#ifndef WF_CUDAEMU_CUDA_RUNTIME_H
#define WF_CUDAEMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include "cudaemu_device.h"
#endif

#endif
