/*
 * Private to the CPU shape kernels (k_shape.c, k_shape_index.c): the byte-moving helpers they share.
 * Every kernel here moves elements as opaque bytes, so one implementation serves every dtype.
 */
#ifndef WF_BACKENDS_CPU_K_SHAPE_H
#define WF_BACKENDS_CPU_K_SHAPE_H

#include "device/kernel.h"


/* Bytes each parallel task should move at least. */
#define WF__SHAPE_GRAIN_BYTES ((int64_t)128 * 1024)

/* Whether optional input i was given. */
static inline bool wf__k_has(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

/* Reads an i32/i64 input of rank <= 1 with at most max values into v; errors name `what`. */
wf_status *wf__k_read_ints(const wf__kctx *k, int idx, const char *what, int64_t *v, int max, int *n);

/* Copies n blocks of eb bytes, taken every sstride bytes from src, contiguously into dst. */
void wf__k_copy_strided(char *dst, const char *src, int64_t n, int64_t sstride, size_t eb);

/* dst[0..bytes) = src, split over the intra-op threads when large. */
void wf__k_pcopy(wf__kctx *k, void *dst, const void *src, size_t bytes);

/* Writes n copies of the eb-byte element at pattern into dst (in parallel when large). */
void wf__k_pfill(wf__kctx *k, void *dst, int64_t n, size_t eb, const void *pattern);

/* Copies a strided view of src into the contiguous dst: output axis i has dims[i] entries that lie
 * st[i] bytes apart in src; elements are eb bytes. rank may be up to 2 * WF_MAX_RANK. */
void wf__k_strided_copy(wf__kctx *k, void *dst, const void *src, int rank, const int64_t *dims,
                        const int64_t *st, size_t eb);

/* Kernels defined in k_shape_index.c. */
wf_status *wf__k_gather(wf__kctx *k);
wf_status *wf__k_gathernd(wf__kctx *k);
wf_status *wf__k_scatternd(wf__kctx *k);
wf_status *wf__k_pad(wf__kctx *k);
wf_status *wf__k_onehot(wf__kctx *k);
wf_status *wf__k_range(wf__kctx *k);
wf_status *wf__k_shape(wf__kctx *k);
wf_status *wf__k_size(wf__kctx *k);
wf_status *wf__k_fill(wf__kctx *k);
wf_status *wf__k_constant_of_shape(wf__kctx *k);

#endif
