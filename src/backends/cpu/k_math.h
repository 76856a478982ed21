/*
 * Private glue between the CPU kernel files of ops_math.c: k_math.c (unary math and activations, the
 * kernel table), k_math_bcast.c (broadcasting binary and variadic ops) and k_math_axis.c (Hardmax,
 * LpNormalization, Det). Nothing here leaves the CPU backend.
 */
#ifndef WF_K_MATH_H
#define WF_K_MATH_H

#include "backends/cpu/k_elementwise.h"

/* k_math_bcast.c */
wf_status *wf__km_k_PRelu(wf__kctx *k);
wf_status *wf__km_k_BitShift(wf__kctx *k);
wf_status *wf__km_k_BitwiseAnd(wf__kctx *k);
wf_status *wf__km_k_BitwiseOr(wf__kctx *k);
wf_status *wf__km_k_BitwiseXor(wf__kctx *k);
wf_status *wf__km_k_Sum(wf__kctx *k);
wf_status *wf__km_k_Mean(wf__kctx *k);
wf_status *wf__km_k_Max(wf__kctx *k);
wf_status *wf__km_k_Min(wf__kctx *k);

/* k_math_axis.c */
wf_status *wf__km_k_Hardmax(wf__kctx *k);
wf_status *wf__km_k_LpNormalization(wf__kctx *k);
wf_status *wf__km_k_Det(wf__kctx *k);

#endif
