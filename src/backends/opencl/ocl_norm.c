/*
 * OpenCL kernels: reductions beyond the basic ones, normalisations, losses, Hardmax, LRN, TopK, Det, global and Lp pools.
 * (Placeholder table; filled by the kernels of this family.)
 */
#include "ocl.h"

const wf__kernel_def ocl_kernels_norm[] = {
    {NULL},
};
