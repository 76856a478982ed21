/* (being written) */
#include "backends/cuda/cuda.h"

const wf__kernel_def cu_kernels_seq[] = {
    {0},
};
