/*
 * The boundary between the CUDA backend's host files (C) and its device code (cuda_kernels.cu): plain C
 * launchers that enqueue one kernel on a stream and return its launch error (cudaSuccess = 0). Pointers
 * are device addresses of element 0 (chunk base plus the tensor's byte offset); dtypes are wf_dtype.
 */
#ifndef WF_CUDA_KERN_H
#define WF_CUDA_KERN_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUK_MAX_RANK 8

/* A broadcast (or strided) walk over an output of `rank` coalesced dims, innermost last, with each
 * operand's stride in elements per dim (0: broadcast). Passed to kernels by value. */
typedef struct cuk_walk {
    int64_t dims[CUK_MAX_RANK];
    int64_t st[3][CUK_MAX_RANK];
    int rank;
    int small;  /* every linear index fits 32 bits: cheaper division */
} cuk_walk;

enum {
    CUK_ADD, CUK_SUB, CUK_MUL, CUK_DIV, CUK_POW, CUK_MAX, CUK_MIN, CUK_MOD, CUK_FMOD,
    CUK_EQ, CUK_NE, CUK_LT, CUK_LE, CUK_GT, CUK_GE, /* bool output */
    CUK_AND, CUK_OR, CUK_XOR                          /* bool inputs */
};

enum {
    CUK_NEG, CUK_ABS, CUK_SIGN, CUK_SQUARE, CUK_RELU, CUK_CLIP, CUK_NOT, /* numeric (NOT: bool) */
    CUK_EXP, CUK_LOG, CUK_SQRT, CUK_RSQRT, CUK_RECIP, CUK_TANH, CUK_SIGMOID, CUK_LEAKY, CUK_ELU,
    CUK_GELU, CUK_GELU_TANH, CUK_ERF, CUK_SOFTPLUS, CUK_FLOOR, CUK_CEIL, CUK_ROUND, CUK_SIN, CUK_COS
};

enum { CUK_RSUM, CUK_RMEAN, CUK_RMAX, CUK_RMIN, CUK_RPROD };

/* y = op(a, b) over walk w (operands 0 and 1); comparisons write bool (one byte). */
int cuk_binary(cudaStream_t s, int dtype, int op, const void *a, const void *b, void *y, const cuk_walk *w, int64_t n);
/* y = op(x) elementwise; pa, pb are the op's float parameters (LeakyRelu alpha, Clip bounds, ...), ia, ib
 * its integer ones (Clip bounds of integer types). */
int cuk_unary(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n, double pa, double pb, int64_t ia,
              int64_t ib);
/* y = Cast(x) to dtype `to`. */
int cuk_cast(cudaStream_t s, int from, int to, const void *x, void *y, int64_t n);
/* z = c ? x : y over walk w (operands c, x, y), for elements of `esize` bytes. */
int cuk_where(cudaStream_t s, int esize, const uint8_t *c, const void *x, const void *y, void *z, const cuk_walk *w,
              int64_t n);
/* y[i] = x[i] + b[(i / inner) % C] */
int cuk_bias_add(cudaStream_t s, int dtype, const void *x, const void *b, void *y, int64_t n, int64_t C, int64_t inner);
/* y[r, c] = scale * C[r * cs0 + c * cs1] over an m x n output (Gemm's C, before the product). */
int cuk_gemm_fill(cudaStream_t s, int dtype, void *y, const void *c, int64_t m, int64_t n, int64_t cs0, int64_t cs1,
                  double scale);
/* y[dst walk] = x[src walk] over walk w: operand 0 the destination, operand 1 the source, strides in
 * elements (negative allowed, for reversed slices). */
int cuk_copy(cudaStream_t s, int esize, const void *x, void *y, const cuk_walk *w, int64_t n);
/* y[o, j, i] = x[o, idx[j], i] with x's middle dim of length axis_len; negative indices count from the
 * end (the host has checked the range). */
int cuk_gather(cudaStream_t s, int esize, const void *x, const void *idx, int idx_i64, void *y, int64_t outer,
               int64_t n_idx, int64_t inner, int64_t axis_len);
/* Softmax / LogSoftmax over `R` rows `inner` elements apart, for outer * inner independent vectors. */
int cuk_softmax(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer, int64_t R, int64_t inner, int is_log);
/* One output per kept position: op over the reduced positions. Kept dims kd (nk of them, strides ks in
 * x) and reduced dims rd (nr, strides rs); count = product of reduced dims. */
int cuk_reduce(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n_out, int nk, const int64_t *kd,
               const int64_t *ks, int nr, const int64_t *rd, const int64_t *rs, int64_t count);

#ifdef __cplusplus
}
#endif

#endif
