/*
 * The boundary between the CUDA host files of the training-path ops (cuda_grad.c: conv and pool
 * backward, the classification losses; cuda_index.c: OneHot, the scatters and gathers, scans, Trilu,
 * ReverseSequence) and their device code (cuda_kernels_grad.cu, cuda_kernels_index.cu). Plain C
 * launchers that enqueue one kernel and return its launch error (cudaSuccess = 0); pointers are device
 * addresses of element 0 and dtypes are wf_dtype values, as in cuda_kern.h.
 */
#ifndef WF_CUDA_KERN_EXT_H
#define WF_CUDA_KERN_EXT_H

#include "backends/cuda/cuda_kern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- cuda_kernels_grad.cu ---- */

/* dx [n, c, h, w] of a convolution from W [oc, c/g, kh, kw] and dy [n, oc, oh, ow]: one dx element per
 * thread, summed in double. */
int cuk_conv_bp_input(cudaStream_t s, int dtype, const void *w, const void *dy, void *dx, const cuk_conv *g);
/* dW [oc, c/g, kh, kw] from x and dy: one block per weight element, its threads over n * oh * ow. */
int cuk_conv_bp_filter(cudaStream_t s, int dtype, const void *x, const void *dy, void *dw, const cuk_conv *g);
/* MaxPool2DGrad (is_max; x is the forward input) or AvgPool2DGrad (x unused) into dx [n, c, h, w];
 * g's oc and g are unused, pe_h / pe_w the end pads. */
int cuk_pool_grad(cudaStream_t s, int dtype, const void *x, const void *dy, void *dx, const cuk_conv *g, int64_t pe_h,
                  int64_t pe_w, int is_max, int include_pad);
/* dx[i] = dy[i / inner] / inner over n elements. */
int cuk_gap_grad(cudaStream_t s, int dtype, const void *dy, void *dx, int64_t n, int64_t inner);
/* NegativeLogLikelihoodLoss (softmax 0) or SoftmaxCrossEntropyLoss (1) of x [N, C, D...] and targets
 * (i32 or i64, t64) [N, D...]; w (may be NULL) one weight per class; targets equal to ign (when has_ign)
 * or outside [0, C) count as ignored, and one outside [0, C) that is not ign is reported in err as
 * (site, target, position, C). lp (may be NULL) receives the log-probabilities. reduction 0 writes the
 * N * D losses to y, 1 their sum and 2 their weighted mean to y[0]. */
int cuk_class_loss(cudaStream_t s, int dtype, int softmax, const void *x, const void *tgt, int t64, const void *w,
                   int has_ign, int64_t ign, void *lp, void *y, int reduction, int64_t N, int64_t C, int64_t D,
                   cuk_err *err, unsigned long long site);

/* ---- cuda_kernels_index.cu ---- */

/* An index walk: up to CUK_MAX_RANK dims with strides, passed by value. */
typedef struct cuk_dims {
    int64_t d[CUK_MAX_RANK], s[CUK_MAX_RANK];
    int n;
} cuk_dims;

/* OneHot: y[o, v, in] = vals[1] if idx[o * inner + in] (negative: + depth) == v else vals[0], for
 * indices of any numeric dtype idt and values of `esize` bytes. */
int cuk_onehot(cudaStream_t s, int esize, int idt, const void *idx, const void *vals, void *y, int64_t n, int64_t depth,
               int64_t inner);
/* GatherND: y[u] = x[(t / per_batch) * batch_elems + tuple_off(t) + u % slice] with t = u / slice; the
 * tuple's `last` = nd.n entries index dims nd.d with strides nd.s (negative wrap, then clamped). An entry
 * out of range is reported in err as (site, index, tuple, entry). */
int cuk_gathernd(cudaStream_t s, int esize, const void *x, const void *idx, int i64, void *y, int64_t n,
                 const cuk_dims *nd, int64_t slice, int64_t per_batch, int64_t batch_elems, cuk_err *err,
                 unsigned long long site);
/* ScatterND into y (already a copy of data) of updates u: reduction 0 none, 1 add, 2 mul, 3 max, 4 min;
 * dtype is the data's wf_dtype. A checking pass reports an entry out of range in err as (site, index,
 * tuple, entry) and marks each tuple's target (of `targets` = the product of the indexed dims) in bm
 * (device scratch of cuk_scatter_bitmap_bytes(targets)); when two tuples hit one target, one thread per
 * slice element walks the tuples in order, else one thread per (tuple, element). bm NULL (an empty
 * output): the check only. */
int cuk_scatternd(cudaStream_t s, int dtype, void *y, const void *u, const void *idx, int i64, const cuk_dims *nd,
                  int64_t slice, int64_t ntup, unsigned *bm, int64_t targets, int red, cuk_err *err,
                  unsigned long long site);
/* Bytes of the scatters' target bitmap: a duplicate flag and one bit per target. */
size_t cuk_scatter_bitmap_bytes(int64_t targets);
/* GatherElements: y[i] = x[offset of i with its axis coordinate replaced by idx[i]] over index dims id
 * and data strides xs (id.s unused). An index out of range gives 0 and is reported in err as (site, index,
 * position). */
int cuk_gather_el(cudaStream_t s, int esize, const void *x, const void *idx, int i64, void *y, int64_t n,
                  const cuk_dims *id, const int64_t *xs, int ax, int64_t D, cuk_err *err, unsigned long long site);
/* ScatterElements: the inverse walk, with the checking pass and bitmap of cuk_scatternd (targets = the
 * elements of y, an index out of range reported as (site, index, position)); in index order by a single
 * thread when two indices hit one element. */
int cuk_scatter_el(cudaStream_t s, int dtype, void *y, const void *u, const void *idx, int i64, int64_t n,
                   const cuk_dims *id, const int64_t *ys, int ax, int64_t D, unsigned *bm, int64_t targets, int red,
                   cuk_err *err, unsigned long long site);
/* Trilu over the last two dims [R, C]: keep upper (c >= r + k) or lower (c <= r + k), else zero. */
int cuk_trilu(cudaStream_t s, int esize, const void *x, void *y, int64_t n, int64_t R, int64_t C, int64_t k, int upper);
/* CumSum (prod 0) / CumProd over D elements `inner` apart, for n / D lines; exclusive, reverse. */
int cuk_cumsum(cudaStream_t s, int dtype, const void *x, void *y, int64_t n, int64_t D, int64_t inner, int excl, int rev,
               int prod);
/* ReverseSequence of x [B, T, ...] (ba 0) or [T, B, ...] (ba 1), blk elements per step; a length outside
 * [0, T] is reported in err as (site, length, batch, T) (and clamped). */
int cuk_revseq(cudaStream_t s, int esize, const void *x, const void *lens, int i64, void *y, int64_t n, int ba, int64_t B,
               int64_t T, int64_t blk, cuk_err *err, unsigned long long site);
/* y[i] = pattern (the element's low `esize` bytes) over n elements; EyeLike when C > 0: the pattern on
 * the diagonal i % C == i / C + k, zero elsewhere. */
int cuk_fill(cudaStream_t s, int esize, void *y, int64_t n, uint64_t pattern, int64_t C, int64_t k);

#ifdef __cplusplus
}
#endif

#endif
