/*
 * The boundary between the CUDA normalisation / selection host file (cuda_norm.c) and its device code
 * (cuda_kernels_norm.cu): plain C launchers that enqueue kernels on a stream and return the launch error
 * (cudaSuccess = 0). Pointers are device addresses of element 0; dtypes are wf_dtype values.
 */
#ifndef WF_CUDA_NORM_H
#define WF_CUDA_NORM_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUN_MAX_RANK 8

/* A fold as ops/kutil_reduce.h plans it: kept groups (kd, ks; nk) enumerate the outputs, reduced
 * groups (rd, rs; nr >= 1) the `count` elements each folds; strides in elements. */
typedef struct cun_geom {
    int64_t kd[CUN_MAX_RANK], ks[CUN_MAX_RANK], rd[CUN_MAX_RANK], rs[CUN_MAX_RANK];
    int nk, nr;
    int64_t count;
} cun_geom;

enum { CUN_L1, CUN_SUMSQ, CUN_LOGSUM, CUN_LOGSUMEXP, CUN_L2 };

/* Reduce{L1,SumSquare,LogSum,LogSumExp,L2} (op CUN_*) of every numeric dtype into n_out outputs:
 * floats in double, integer L1 / sum of squares wrapping in 64 bits. */
int cun_reduce(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n_out, const cun_geom *g);
/* MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over each output's folded elements, written
 * in place of them in y (x's layout). */
int cun_mvn(cudaStream_t s, int dtype, const void *x, void *y, int64_t n_out, const cun_geom *g);
/* Group/InstanceNormalization: groups of len contiguous elements; scale / bias per channel (e / S) % C,
 * or per group (e / ((C / G) * S)) % G when per_group. */
int cun_groupnorm(cudaStream_t s, int dtype, const void *x, void *y, const void *sc, const void *bi, int64_t groups,
                  int64_t len, int64_t S, int64_t C, int64_t G, int per_group, double eps);
/* RMSNormalization over rows of M; the scale broadcasts over the row's nr dims nd with strides ss. */
int cun_rmsnorm(cudaStream_t s, int dtype, const void *x, void *y, const void *sc, int64_t rows, int64_t M, int nr,
                const int64_t *nd, const int64_t *ss, double eps);
/* LRN over channels of [N, C, S] (n = N * C * S); the window is [c - lo, c + hi]. */
int cun_lrn(cudaStream_t s, int dtype, const void *x, void *y, int64_t n, int64_t C, int64_t S, int64_t lo, int64_t hi,
            double alpha, double beta, double bias, double size);
/* Hardmax (p == 0) or LpNormalization (p 1 or 2) along lines of n elements `inner` apart. */
int cun_line(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer, int64_t n, int64_t inner, int p);
/* TopK along D elements `inner` apart: values into y and indices into yi, [outer, K, inner]. */
int cun_topk(cudaStream_t s, int dtype, const void *x, void *y, int64_t *yi, int64_t outer, int64_t D, int64_t K,
             int64_t inner, int largest);
/* LpPool over ns spatial dims: input dims xd, output dims od, kernel k, strides st, dilations dl,
 * begin pads pb; one output per (plane, position). */
typedef struct cun_pool {
    int64_t xd[CUN_MAX_RANK], od[CUN_MAX_RANK], k[CUN_MAX_RANK], st[CUN_MAX_RANK], dl[CUN_MAX_RANK], pb[CUN_MAX_RANK];
    int ns;
    int64_t in_plane, out_plane, win;
} cun_pool;
int cun_lppool(cudaStream_t s, int dtype, const void *x, void *y, int64_t n_out, const cun_pool *P, double p);
/* MaxUnpool: y (zero-filled by the caller) at the unpooled index ix[e] (i32 or i64) placed in the
 * output: ud the unpooled dims, us their strides, os the output strides. An index outside the unpooled
 * elements is not written and is reported in err (cuda_kern.h) as (site, index, position, their count). */
int cun_max_unpool(cudaStream_t s, int esize, const void *x, const void *ix, int ix64, void *y, int64_t n, int rank,
                   const int64_t *ud, const int64_t *us, const int64_t *os, struct cuk_err *err,
                   unsigned long long site);
/* Det of `batch` m x m matrices by LU with partial pivoting in the double scratch a (batch * m * m). */
int cun_det(cudaStream_t s, int dtype, const void *x, void *y, double *a, int64_t batch, int64_t m);
/* BitCast of n one-byte elements to bool: any nonzero byte becomes 1. */
int cun_to_bool(cudaStream_t s, const void *x, void *y, int64_t n);
/* Compress: y[o, q, i] = x[o, sel[q], i] over D entries of the axis. */
int cun_compress(cudaStream_t s, int esize, const void *x, const int64_t *sel, void *y, int64_t outer, int64_t nnz,
                 int64_t inner, int64_t D);
/* Unique over n slices of len elements (slice j's element t at ((t / inner) * n + j) * inner + t % inner):
 * first / cnt / rank get each slice's group's first occurrence, size and output place; ng the number of
 * groups (one i64). Then cun_unique_fill writes the outputs (y with ng slices). */
int cun_unique_plan(cudaStream_t s, int dtype, const void *x, int64_t n, int64_t len, int64_t inner, int sorted,
                    int64_t *first, int64_t *cnt, int64_t *rank, int64_t *ng);
int cun_unique_fill(cudaStream_t s, int esize, const void *x, int64_t n, int64_t len, int64_t inner, int64_t ng,
                    const int64_t *first, const int64_t *cnt, const int64_t *rank, void *y, int64_t *ix, int64_t *inv,
                    int64_t *counts);
/* NonMaxSuppression over nbc = batches * C (batch, class) pairs of S boxes: each pair's kept boxes into
 * sel (nbc * S, scratch) and their number into nsel; order is scratch of nbc * S. */
int cun_nms(cudaStream_t s, int dtype, const void *boxes, const void *scores, int64_t nbc, int64_t S, int64_t C,
            int use_thr, double thr, double iou, int center, int64_t max_out, int64_t *order, int64_t *sel,
            int64_t *nsel);
/* Writes the [n, 3] NMS output from sel / nsel and each pair's start row. */
int cun_nms_out(cudaStream_t s, const int64_t *sel, const int64_t *nsel, const int64_t *start, int64_t nbc, int64_t S,
                int64_t C, int64_t *y);

#ifdef __cplusplus
}
#endif

#endif
