/*
 * OpenCL kernels: Einsum, data-dependent outputs (NonZero, Unique, Compress, NonMaxSuppression), recurrent nets (RNN, GRU, LSTM) and Attention.
 * (Placeholder table; filled by the kernels of this family.)
 */
#include "ocl.h"

const wf__kernel_def ocl_kernels_seq[] = {
    {NULL},
};
