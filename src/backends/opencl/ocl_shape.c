/* OpenCL kernels of the shape family (filled in by the family's author). */
#include "backends/opencl/ocl.h"

const wf__kernel_def ocl_kernels_shape[] = {
    {0},
};
