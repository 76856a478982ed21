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
