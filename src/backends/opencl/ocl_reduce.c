/* OpenCL kernels of the reduce family (filled in by the family's author). */
#include "backends/opencl/ocl.h"

const wf__kernel_def ocl_kernels_reduce[] = {
    {0},
};
