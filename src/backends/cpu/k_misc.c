/* CPU kernels of ops_misc.c. */
#include "device/kernel.h"

const wf__kernel_def wf__cpu_kernels_misc[] = {
    {0},
};
