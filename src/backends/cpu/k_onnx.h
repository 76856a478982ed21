/*
 * Private to the CPU kernels of ops_onnx.c (k_onnx*.c): shared helpers and the kernels k_onnx.c's table
 * lists from its siblings. Float kernels compute in f64 and, where the ONNX reference computes in the
 * input's dtype (f16, bf16), round each step to it with wf__ko_round so the results match it.
 */
#ifndef WF_BACKENDS_CPU_K_ONNX_H
#define WF_BACKENDS_CPU_K_ONNX_H

#include "device/kernel.h"

#define WF__KO_SB 160
#define WF__KO_GRAIN 16384 /* elements per parallel task */

static inline bool wf__ko_has(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

/* v rounded to dtype t (a float dtype; f64 is exact). */
static inline double wf__ko_round(double v, wf_dtype t)
{
    switch (t) {
    case WF_F32: return (double)(float)v;
    case WF_F16: return (double)wf__h2f(wf__f2h((float)v));
    case WF_BF16: return (double)wf__bf2f(wf__f2bf((float)v));
    default: return v;
    }
}

/* A new f64 copy of t's elements (caller frees with wf__free). */
wf_status *wf__ko_widen(const wf__kctx *k, const wf_tensor *t, double **out);
/* A new zeroed buffer of n doubles. */
wf_status *wf__ko_alloc(const wf__kctx *k, int64_t n, const char *what, double **out);

wf_status *wf__k_attention(wf__kctx *k);
wf_status *wf__k_rotary_embedding(wf__kctx *k);
wf_status *wf__k_quantize_linear(wf__kctx *k);
wf_status *wf__k_dequantize_linear(wf__kctx *k);
wf_status *wf__k_dynamic_quantize_linear(wf__kctx *k);
wf_status *wf__k_matmul_integer(wf__kctx *k);
wf_status *wf__k_qlinear_matmul(wf__kctx *k);
wf_status *wf__k_conv_integer(wf__kctx *k);
wf_status *wf__k_qlinear_conv(wf__kctx *k);

#endif
