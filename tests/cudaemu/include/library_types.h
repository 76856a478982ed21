/*
 * weft's CUDA emulator (tests/cudaemu): the data-type enum that cuBLAS and the runtime share, with the
 * real toolkit's numeric values (only the subset the emulator's cuBLAS understands is meaningful).
 */
#ifndef WF_CUDAEMU_LIBRARY_TYPES_H
#define WF_CUDAEMU_LIBRARY_TYPES_H

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

typedef enum libraryPropertyType_t { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;

#endif
