/*
 * Private glue between the CPU elementwise kernel files: k_elementwise.c (binary ops, comparisons,
 * logic, Where, the kernel table), k_elementwise_unary.c (unary ops and the f32 math they use) and
 * k_elementwise_cast.c (Cast). Nothing here leaves the CPU backend.
 */
#ifndef WF_K_ELEMENTWISE_H
#define WF_K_ELEMENTWISE_H

#include "device/kernel.h"

/* Loop functions get an AVX-512 and an AVX2 clone chosen at load time; other targets get one copy. */

/* Elements per parallel task: cheap loops move ~128 KB per task, transcendental ones do ~10x the work
 * per element and split finer. */
#define WF__EW_GRAIN 32768
#define WF__EW_GRAIN_HEAVY 4096

/* f16/bf16 <-> f32 for n contiguous elements (t is WF_F16 or WF_BF16); both vectorise. */
void wf__ew_half_to_f32(const uint16_t *src, float *dst, int64_t n, wf_dtype t);
void wf__ew_f32_to_half(const float *src, uint16_t *dst, int64_t n, wf_dtype t);
/* y = x / (1 + e^(-a x)) in f32 with the vectorised exp of the unary kernels (Swish). */
void wf__ew_swish_f32(const float *x, float *y, int64_t n, float a);
/* p = p * clamp(p / 6 + 1/2, 0, 1) in place, in f32 (HardSwish's arithmetic; AVX2 where the CPU has it). */
void wf__ew_hardswish_f32(float *p, int64_t n);
/* y = 0.5 x (1 + erf(x / sqrt(2))) in f32, the Gelu node's own loop (exact form). */
void wf__ew_gelu_f32(const float *x, float *y, int64_t n);
/* The same for Gelu's tanh form (approximate "tanh"). */
void wf__ew_gelu_tanh_f32(const float *x, float *y, int64_t n);

/* The f32 loops of one elementwise op, for the generated elementwise kernels (k_fused.c), which run
 * the very loops of the single-op kernels over tiles and so give their results bit for bit.
 * A binary op's loop writes n outputs with a and b advancing by sa, sb in {0, 1} elements. */
typedef void (*wf__ew_bin_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *o, int64_t n);
/* NULL when op is not one of Add, Sub, Mul, Div, Maximum, Minimum. */
wf__ew_bin_fn wf__ew_binary_f32(const char *op);
/* A unary op's loop with its parameters bound: u->call(u, x, y, n). */
typedef struct wf__ew_unary {
    void (*call)(const struct wf__ew_unary *u, const float *x, float *y, int64_t n);
    void (*impl)(void);             /* the family's loop, cast back by call */
    _Alignas(8) unsigned char p[48]; /* the family's parameters */
} wf__ew_unary;
/* false when op has no such loop. alpha, beta: see wf__ew_insn. k_elementwise_unary.c has the ops of
 * WF__EW_UNARY_OPS below, k_math.c Swish, HardSwish and HardSigmoid. */
bool wf__ew_unary_f32(const char *op, double alpha, double beta, wf__ew_unary *u);
bool wf__km_unary_f32(const char *op, double alpha, double beta, wf__ew_unary *u);

/* Unary ops: X(Op, dtype mask). The kernel for Op is wf__ew_k_<Op>. */
#define WF__EW_UNARY_OPS(X)                                                                        \
    X(Neg, WF__DT_NUMERIC)                                                                         \
    X(Abs, WF__DT_NUMERIC)                                                                         \
    X(Sign, WF__DT_NUMERIC)                                                                        \
    X(Square, WF__DT_NUMERIC)                                                                      \
    X(Relu, WF__DT_NUMERIC)                                                                        \
    X(Exp, WF__DT_FLOATS)                                                                          \
    X(Log, WF__DT_FLOATS)                                                                          \
    X(Sqrt, WF__DT_FLOATS)                                                                         \
    X(Rsqrt, WF__DT_FLOATS)                                                                        \
    X(Reciprocal, WF__DT_FLOATS)                                                                   \
    X(Tanh, WF__DT_FLOATS)                                                                         \
    X(Sigmoid, WF__DT_FLOATS)                                                                      \
    X(LeakyRelu, WF__DT_FLOATS)                                                                    \
    X(Elu, WF__DT_FLOATS)                                                                          \
    X(Gelu, WF__DT_FLOATS)                                                                         \
    X(Erf, WF__DT_FLOATS)                                                                          \
    X(Softplus, WF__DT_FLOATS)                                                                     \
    X(Floor, WF__DT_FLOATS)                                                                        \
    X(Ceil, WF__DT_FLOATS)                                                                         \
    X(Round, WF__DT_FLOATS)                                                                        \
    X(Clip, WF__DT_NUMERIC)                                                                        \
    X(Not, WF__DT_BIT(WF_BOOL))

#define WF__EW_DECL_(op, mask) wf_status *wf__ew_k_##op(wf__kctx *k);
WF__EW_UNARY_OPS(WF__EW_DECL_)
#undef WF__EW_DECL_

wf_status *wf__ew_k_Cast(wf__kctx *k);

#endif
