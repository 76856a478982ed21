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
    CUK_AND, CUK_OR, CUK_XOR,                         /* bool inputs */
    CUK_PRELU, CUK_BAND, CUK_BOR, CUK_BXOR, CUK_SHL, CUK_SHR /* bitwise and shifts: integers only */
};

enum {
    CUK_NEG, CUK_ABS, CUK_SIGN, CUK_SQUARE, CUK_RELU, CUK_CLIP, CUK_NOT, /* numeric (NOT: bool) */
    CUK_EXP, CUK_LOG, CUK_SQRT, CUK_RSQRT, CUK_RECIP, CUK_TANH, CUK_SIGMOID, CUK_LEAKY, CUK_ELU,
    CUK_GELU, CUK_GELU_TANH, CUK_ERF, CUK_SOFTPLUS, CUK_FLOOR, CUK_CEIL, CUK_ROUND, CUK_SIN, CUK_COS,
    CUK_TAN, CUK_ASIN, CUK_ACOS, CUK_ATAN, CUK_SINH, CUK_COSH, CUK_ASINH, CUK_ACOSH, CUK_ATANH,
    CUK_HSIG, CUK_HSWISH, CUK_SELU, CUK_CELU, CUK_MISH, CUK_SOFTSIGN, CUK_THRELU, CUK_SWISH,
    CUK_SHRINK, /* floats: a = lambd, b = bias; integers: i[0..3] as the host splits them */
    CUK_BNOT,   /* integers */
    CUK_MDIV,   /* v / a (Mean's final step) */
    CUK_ISNAN, CUK_ISINF /* bool output (cuk_unary_bool); ISINF: i[0] detect +inf, i[1] detect -inf */
};

/* An op's parameters: float ones (LeakyRelu alpha, Clip bounds, Selu gamma and gamma*alpha, ...) and
 * integer ones (Clip bounds of integer types, integer Shrink). */
typedef struct cuk_upar {
    double a, b;
    int64_t i[4];
} cuk_upar;

enum { CUK_RSUM, CUK_RMEAN, CUK_RMAX, CUK_RMIN, CUK_RPROD };

/* y = op(a, b) over walk w (operands 0 and 1); comparisons write bool (one byte). */
int cuk_binary(cudaStream_t s, int dtype, int op, const void *a, const void *b, void *y, const cuk_walk *w, int64_t n);
/* One step of an f16/bf16 (dtype) Sum / Mean into the f32 accumulator acc of n elements: acc = x
 * (first) or acc + x, with x read through walk operand 0 (acc is contiguous in the output's shape). */
int cuk_fold_f32(cudaStream_t s, int dtype, const void *x, float *acc, const cuk_walk *w, int64_t n, int first);
/* y = op(x) elementwise with parameters p (NULL: all zero). */
int cuk_unary(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n, const cuk_upar *p);
/* y = op(x) with a bool output (IsNaN, IsInf) for float x. */
int cuk_unary_bool(cudaStream_t s, int dtype, int op, const void *x, uint8_t *y, int64_t n, const cuk_upar *p);
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
/* The device's error record (cu_err_* in cuda_index.c): the first bad index a kernel meets, written by the
 * kernel that wins the compare-and-swap of `site` from 0 to its launch's site id, and read by the host
 * once, at the next synchronisation. */
typedef struct cuk_err {
    unsigned long long site;
    long long value, pos, entry;
} cuk_err;

/* Checks the n integer elements (wf_dtype dtype) of b: mode 1 reports a zero (a divisor), 2 a negative
 * value (an exponent) in err as (site, value, element). */
int cuk_int_check(cudaStream_t s, int dtype, const void *b, int64_t n, int mode, cuk_err *err, unsigned long long site);
/* Checks n i32 (i64 0) or i64 values against [lo, hi): the first outside is reported in err as (site,
 * value, position, shown), for the ops whose kernels clamp such values (cuda_kernels_index.cu). */
int cuk_range_check(cudaStream_t s, const void *v, int i64, int64_t n, int64_t lo, int64_t hi, int64_t shown,
                    cuk_err *err, unsigned long long site);
/* y[o, j, i] = x[o, idx[j], i] with x's middle dim of length axis_len; negative indices count from the
 * end. An index out of range gives 0 and is reported in err as (site, index, j). */
int cuk_gather(cudaStream_t s, int esize, const void *x, const void *idx, int idx_i64, void *y, int64_t outer,
               int64_t n_idx, int64_t inner, int64_t axis_len, cuk_err *err, unsigned long long site);
/* Softmax / LogSoftmax over `R` rows `inner` elements apart, for outer * inner independent vectors. */
int cuk_softmax(cudaStream_t s, int dtype, const void *x, void *y, int64_t outer, int64_t R, int64_t inner, int is_log);
/* One output per kept position: op over the reduced positions. Kept dims kd (nk of them, strides ks in
 * x) and reduced dims rd (nr, strides rs); count = product of reduced dims. */
int cuk_reduce(cudaStream_t s, int dtype, int op, const void *x, void *y, int64_t n_out, int nk, const int64_t *kd,
               const int64_t *ks, int nr, const int64_t *rd, const int64_t *rs, int64_t count);

/* ---- cuda_kernels_nn.cu ---- */

/* Conv2D / ConvTranspose2D geometry in the order of the OpenCL kernels: n c h w oc g kh kw oh ow sh sw dh
 * dw ph pw (begin pads; a transposed conv's pads may be negative). */
typedef struct cuk_conv {
    int64_t n, c, h, w, oc, g, kh, kw, oh, ow, sh, sw, dh, dw, ph, pw;
} cuk_conv;
/* Direct convolution, one output element per thread (the fallback when cuDNN is absent or cannot take
 * the geometry); b may be NULL. */
int cuk_conv2d(cudaStream_t s, int dtype, int transposed, const void *x, const void *w, const void *b, void *y,
               const cuk_conv *g);
/* Max (is_max) or average pooling over the output [N*C, oh, ow]; g's oc and g are unused, pe_h / pe_w the
 * end pads; include_pad: count_include_pad. */
int cuk_pool2d(cudaStream_t s, int dtype, const void *x, void *y, const cuk_conv *g, int64_t pe_h, int64_t pe_w,
               int is_max, int include_pad);
/* y[p] = mean of x[p * inner ... + inner) (GlobalAvgPool), for `planes` outputs. */
int cuk_gap(cudaStream_t s, int dtype, const void *x, void *y, int64_t planes, int64_t inner);
/* y = (x - mean) / sqrt(var + eps) * scale + bias per channel (i / S) % C. */
int cuk_batchnorm(cudaStream_t s, int dtype, const void *x, void *y, const void *scale, const void *bias,
                  const void *mean, const void *var, int64_t n, int64_t C, int64_t S, double eps);
/* FusedBatchNorm (training) over x [N, C, S]: mean and biased variance per channel (x's dtype), then y.
 * Its gradient: d_scale and d_offset per channel, then dx; dmean / dvar (may be NULL) are the gradients
 * that reach the statistics. */
int cuk_fused_bn(cudaStream_t s, int dtype, const void *x, void *y, const void *scale, const void *offset, void *mean,
                 void *var, int64_t N, int64_t C, int64_t S, double eps);
int cuk_fused_bn_grad(cudaStream_t s, int dtype, const void *dy, const void *x, void *dx, const void *scale,
                      const void *mean, const void *var, const void *dmean, const void *dvar, void *dscale,
                      void *doffset, int64_t N, int64_t C, int64_t S, double eps);
/* LayerNormalization over rows of D; scale and bias broadcast over the normalised dims nd (nr of them,
 * element strides ss / bs, 0 where broadcast). mean / inv_std (f32, may be NULL) get each row's stats. */
int cuk_layernorm(cudaStream_t s, int dtype, const void *x, void *y, const void *scale, const void *bias, float *mean,
                  float *inv_std, int64_t rows, int64_t D, double eps, int nr, const int64_t *nd, const int64_t *ss,
                  const int64_t *bs);
/* ArgMax / ArgMin over R elements `inner` apart, i64 output of outer * inner; NaN wins. */
int cuk_argext(cudaStream_t s, int dtype, const void *x, int64_t *y, int64_t outer, int64_t R, int64_t inner,
               int is_max, int last);
/* Pad (mode 0 constant with the element bytes in pat, 1 reflect, 2 edge, 3 wrap) of x (dims idims, element
 * strides ist) into the contiguous y (dims od) with begin pads pb. Tile is wrap with no begin pads. */
int cuk_pad(cudaStream_t s, int esize, const void *x, void *y, int64_t n, int rank, const int64_t *od,
            const int64_t *idims, const int64_t *pb, const int64_t *ist, int mode, uint64_t pat);

/* Integer MatMul geometry: C [batch, m, n] (contiguous) = A x B, element (i, q) of A's batch entry at
 * i * sam + q * sak and (q, j) of B's at q * sbk + j * sbn; batch entry bi splits over the nb dims bat,
 * with each operand's element stride per batch dim in a_bs / b_bs (0 where it broadcasts). */
typedef struct cuk_igemm {
    int64_t m, n, k, batch;
    int nb;
    int64_t bat[CUK_MAX_RANK], a_bs[CUK_MAX_RANK], b_bs[CUK_MAX_RANK];
    int64_t sam, sak, sbk, sbn;
} cuk_igemm;
/* C = A x B for i32 / i64 (dtype), summed with wrapping; k may be 0 (C is then zeroed). */
int cuk_imatmul(cudaStream_t s, int dtype, const void *a, const void *b, void *c, const cuk_igemm *g);
/* Integer Gemm's epilogue over y [m, n] (i32 / i64) in place, as the CPU: each term truncated on its own,
 * y = (int64)(y * alpha) + (int64)(beta * C[i * cs0 + j * cs1]) (c NULL: no C), wrapped to the dtype. */
int cuk_igemm_epilogue(cudaStream_t s, int dtype, void *y, const void *c, int64_t m, int64_t n, int64_t cs0, int64_t cs1,
                       double alpha, double beta);

#ifdef __cplusplus
}
#endif

#endif
