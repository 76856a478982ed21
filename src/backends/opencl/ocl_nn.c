/* OpenCL kernels of the nn family (filled in by the family's author). */
#include "backends/opencl/ocl.h"

const wf__kernel_def ocl_kernels_nn[] = {
    {0},
};
