/*
 * Private glue between ocl_norm.c (the family's kernel source, the reductions, Hardmax, LpNormalization,
 * TopK, Det, the pools and the kernel table) and ocl_norm_loss.c (Group/Instance/RMS/MeanVariance
 * normalisation, LRN and the two losses).
 */
#ifndef WF_OCL_NORM_H
#define WF_OCL_NORM_H

#include "backends/opencl/ocl_nnr.h"

/* The kernel `name` of the family's one program, built for dtype t. */
wf_status *ocl_norm_kernel(wf__kctx *k, wf_dtype t, const char *name, cl_kernel *out);

/* x viewed as groups: the kept axes (bit clear in mask) enumerate the groups, the axes with their bit set
 * are folded within each group. Adjacent axes of one role merge and size-1 axes vanish, so both fit
 * the kernels' eight-dim index arguments; nr is at least 1 (one element per group when nothing folds). */
typedef struct ocl_norm_plan {
    cl_int nk, nr;
    cl_ulong8 kd, ks, rd, rs;
    cl_ulong count; /* elements folded per group */
} ocl_norm_plan;
void ocl_norm_plan_make(const wf_tensor *x, unsigned mask, ocl_norm_plan *p);

/* A scratch device buffer of n bytes (at least 1); release it after the kernels using it are queued. */
wf_status *ocl_norm_scratch(wf__kctx *k, size_t n, cl_mem *out);

/* Kernels of ocl_norm_loss.c, listed in ocl_norm.c's table. */
wf_status *ocl_norm_k_groupnorm(wf__kctx *k);
wf_status *ocl_norm_k_rmsnorm(wf__kctx *k);
wf_status *ocl_norm_k_mvn(wf__kctx *k);
wf_status *ocl_norm_k_lrn(wf__kctx *k);
wf_status *ocl_norm_k_loss(wf__kctx *k);

#endif
