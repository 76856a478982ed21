/*
 * Private to the CPU kernels of ops_rnn_image.c (k_rnn.c, k_image_sample.c, k_signal_misc.c): shared
 * helpers and the kernels the table in k_rnn.c lists. Float kernels widen their inputs to f64 once,
 * compute there and narrow the result, so each loop exists once for f32, f64, f16 and bf16.
 */
#ifndef WF_BACKENDS_CPU_K_RNN_IMAGE_H
#define WF_BACKENDS_CPU_K_RNN_IMAGE_H

#include "device/kernel.h"

#define WF__KO2_SB 160

/* Whether optional input i was given. */
static inline bool wf__ko2_has(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

/* A new f64 copy of t's elements (NULL t gives NULL). Caller frees with wf__free. */
wf_status *wf__ko2_widen(const wf__kctx *k, const wf_tensor *t, double **buf);
/* A new zeroed buffer of n doubles; errors name `what`. */
wf_status *wf__ko2_zeros(const wf__kctx *k, int64_t n, const char *what, double **buf);
/* Allocates output idx as dtype/shape and fills it from n f64 values. */
wf_status *wf__ko2_emit(wf__kctx *k, int idx, wf_dtype dtype, int rank, const int64_t *dims, const double *v);
/* Reads an integer input (i32/i64, rank <= 1) of at most max values into vals; *n gets the count. */
wf_status *wf__ko2_ints(const wf__kctx *k, int idx, const char *what, int64_t *vals, int max, int *n);

wf_status *wf__k_grid_sample(wf__kctx *k);
wf_status *wf__k_affine_grid(wf__kctx *k);
wf_status *wf__k_roi_align(wf__kctx *k);
wf_status *wf__k_col2im(wf__kctx *k);
wf_status *wf__k_max_unpool(wf__kctx *k);
wf_status *wf__k_nms(wf__kctx *k);
wf_status *wf__k_unique(wf__kctx *k);
wf_status *wf__k_dft(wf__kctx *k);
wf_status *wf__k_bitcast(wf__kctx *k);

#endif
