/* f32 scratch for the CPU kernels' 16-bit paths (an f16 MatMul, a bf16 first-layer convolution and its
 * gradients, a bf16 reduction), from a small per-thread cache so that a run pays no page faults for
 * them (k_dnnl.c). */
#ifndef WF_BACKENDS_CPU_K_TMP_H
#define WF_BACKENDS_CPU_K_TMP_H

#include "device/kernel.h"

/* An uninitialised f32 buffer of n elements, and one holding n elements of `from` converted to f32 (NULL p
 * gives NULL; large ones convert on the intra-op threads); free both with wf__dn_tmp_free. */
wf_status *wf__dn_alloc_f32(wf__kctx *k, int64_t n, float **out);
wf_status *wf__dn_to_f32(wf__kctx *k, const void *p, wf_dtype from, int64_t n, float **out);
/* dst[0..n) of dtype `to` = act(src) (WF__ACT_*; none: a plain conversion), on the intra-op threads when
 * large: the 16-bit paths' way back, with the activation in the same pass. */
void wf__dn_from_f32(wf__kctx *k, const float *src, void *dst, wf_dtype to, int64_t n, int act, double alpha,
                     double beta);
/* Frees a buffer of wf__dn_alloc_f32 / wf__dn_to_f32 into the calling thread's small cache of them. */
void wf__dn_tmp_free(void *p);
/* Frees the calling thread's cached blocks (tests that count live allocations). */
void wf__dn_tmp_flush(void);

#endif
