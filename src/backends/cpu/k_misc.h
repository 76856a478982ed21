/*
 * Private to the misc-group CPU kernels (k_misc*.c): the helpers they share and the kernels the table in
 * k_misc.c lists. Arithmetic kernels here widen their inputs to f64 (floats) or i64 (integers) once,
 * compute in that class and narrow the result, so each loop exists once.
 */
#ifndef WF_BACKENDS_CPU_K_MISC_H
#define WF_BACKENDS_CPU_K_MISC_H

#include "device/kernel.h"

#define WF__KM_SB 160
#define WF__KM_GRAIN 16384 /* elements per parallel task */

/* Whether optional input i was given. */
static inline bool wf__km_has(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

/* A new buffer with t's elements as f64 (as_int false) or i64 (as_int true). Caller frees with wf__free. */
wf_status *wf__km_widen(const wf__kctx *k, const wf_tensor *t, bool as_int, void **buf);
/* A new uninitialised buffer of n 8-byte elements; errors name `what`. */
wf_status *wf__km_alloc8(const wf__kctx *k, int64_t n, const char *what, void **buf);
/* Reads a scalar (or one-element) integer input. */
wf_status *wf__km_scalar_int(const wf__kctx *k, int idx, const char *what, int64_t *v);
/* Offsets (in elements) of every position of the axes in `mask` of dims, odometer order; *n is
 * their count. Caller frees *off. */
wf_status *wf__km_offsets(const wf__kctx *k, int rank, const int64_t *dims, unsigned mask, int64_t **off,
                          int64_t *n);

wf_status *wf__k_instancenorm(wf__kctx *k);
wf_status *wf__k_groupnorm(wf__kctx *k);
wf_status *wf__k_lrn(wf__kctx *k);
wf_status *wf__k_mvn(wf__kctx *k);
wf_status *wf__k_rmsnorm(wf__kctx *k);
wf_status *wf__k_reduce_misc(wf__kctx *k);
/* k_reduce.c: ReduceSumSquare and ReduceLogSum of float tensors (wf__k_reduce_misc hands them over) */
wf_status *wf__k_reduce_sum_square_float(wf__kctx *k);
wf_status *wf__k_reduce_log_sum_float(wf__kctx *k);
/* k_reduce.c: GlobalMaxPool of float tensors (wf__k_global_max_pool hands them over) */
wf_status *wf__k_global_max_pool_float(wf__kctx *k);
wf_status *wf__k_global_max_pool(wf__kctx *k);
wf_status *wf__k_cumsum(wf__kctx *k);
wf_status *wf__k_topk(wf__kctx *k);
wf_status *wf__k_einsum(wf__kctx *k);
wf_status *wf__k_resize(wf__kctx *k);

#endif
