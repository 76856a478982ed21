/*
 * Private glue between ocl_image.c (resampling and geometry: Resize, GridSample, AffineGrid, RoiAlign,
 * Col2Im, MaxUnpool, CenterCropPad) and ocl_quant_signal.c (signal, quantisation, BitCast, RotaryEmbedding):
 * the kernel-source prelude that adds a wide accumulator type to the elementwise prelude, and small
 * host helpers for scratch buffers and read-backs.
 */
#ifndef WF_OCL_IMAGE_H
#define WF_OCL_IMAGE_H

#include "backends/opencl/ocl_elementwise.h"

/* The CPU kernels of this family widen to double, compute, and convert back once (wf__store_f64); the
 * kernels compute in ACC (double where the device has it) and store with STA, which rounds and
 * truncates the same way: floats through f32 for f16/bf16, integers toward zero with NaN -> 0, then
 * wrapping through int64. LDA loads any dtype as ACC. */
#define OCLIMG_PRELUDE                                                                                             \
    OCLEW_PRELUDE                                                                                                  \
    "#ifdef HAS_FP64\n#define ACC double\n#else\n#define ACC float\n#endif\n"                                      \
    "#ifdef DT\n"                                                                                                  \
    "#ifdef IS_HALF\n#define LDA(p, i) ((ACC)LD(p, i))\n#define STA(p, i, v) STO(p, i, (float)(v))\n"              \
    "#elif defined(IS_FLT)\n#define LDA(p, i) ((ACC)(p)[i])\n#define STA(p, i, v) ((p)[i] = (ST)(v))\n"             \
    "#elif defined(IS_BOOL)\n#define LDA(p, i) ((ACC)((p)[i] != 0))\n#define STA(p, i, v) ((p)[i] = (v) != 0)\n"    \
    "#else\n"                                                                                                      \
    "long acc2l(ACC v) { return v != v ? 0 : v >= (ACC)9.2233720368547758e18 ? LONG_MAX : "                       \
    "v <= (ACC)-9.2233720368547758e18 ? LONG_MIN : (long)v; }\n"                                                   \
    "#define LDA(p, i) ((ACC)(p)[i])\n#define STA(p, i, v) ((p)[i] = (ST)acc2l(v))\n"                              \
    "#endif\n"                                                                                                     \
    "#endif\n"

/* Kernel k_<name> of program prog built from src for dtype t (WF_DTYPE_INVALID: none). */
wf_status *oclimg_kernel(wf__kctx *k, const char *prog, const char *src, wf_dtype t, const char *name,
                         cl_kernel *out);
/* A device scratch buffer of n bytes (at least 1), optionally filled from host memory. Release it with
 * clReleaseMemObject after enqueueing its users: queued kernels keep it alive. */
wf_status *oclimg_buffer(wf__kctx *k, size_t n, const void *init, cl_mem *out);
/* The element size of ACC on k's device. */
static inline size_t oclimg_acc_size(const wf__kctx *k) { return ocl_of(k)->fp64 ? 8 : 4; }
/* t widened to a fresh ACC buffer (release it after enqueueing its users). */
wf_status *oclimg_widen(wf__kctx *k, const wf_tensor *t, cl_mem *out);
/* Launch over n work items (nothing when n == 0). */
wf_status *oclimg_run(wf__kctx *k, cl_kernel kern, int n_args, const ocl_arg *args, size_t n);
/* Up to max values of a small 1-D int or float input read back to the host (int64 / double). */
wf_status *oclimg_ints(wf__kctx *k, int idx, const char *what, int64_t *vals, int max, int *n);
wf_status *oclimg_floats(wf__kctx *k, int idx, const char *what, double *vals, int max, int *n);
/* Attribute shorthands (defaults come from the op schema). */
int64_t oclimg_attr_i(const wf__kctx *k, const char *name);
double oclimg_attr_f(const wf__kctx *k, const char *name);
const char *oclimg_attr_s(const wf__kctx *k, const char *name);
static inline bool oclimg_has(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

/* Kernels of ocl_quant_signal.c, listed in the table of ocl_image.c: X(Op, dtype mask, key input). */
#define OCLIMG_QI (WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8))
#define OCLIMG2_OPS(X)                                                                                             \
    X(DFT, WF__DT_FLOATS, 0)                                                                                       \
    X(HannWindow, WF__DT_NUMERIC, -1)                                                                              \
    X(HammingWindow, WF__DT_NUMERIC, -1)                                                                           \
    X(BlackmanWindow, WF__DT_NUMERIC, -1)                                                                          \
    X(QuantizeLinear, WF__DT_FLOATS | WF__DT_BIT(WF_I32), 0)                                                       \
    X(DequantizeLinear, OCLIMG_QI | WF__DT_BIT(WF_I16) | WF__DT_BIT(WF_I32), 0)                                    \
    X(DynamicQuantizeLinear, WF__DT_BIT(WF_F32), 0)                                                                \
    X(MatMulInteger, OCLIMG_QI, 0)                                                                                 \
    X(QLinearMatMul, OCLIMG_QI, 0)                                                                                 \
    X(ConvInteger, OCLIMG_QI, 0)                                                                                   \
    X(QLinearConv, OCLIMG_QI, 0)                                                                                   \
    X(BitCast, WF__DT_ALL, 0)                                                                                      \
    X(RotaryEmbedding, WF__DT_FLOATS, 0)
#define OCLIMG2_DECL(Op, mask, key) wf_status *oclimg_k_##Op(wf__kctx *k);
OCLIMG2_OPS(OCLIMG2_DECL)
#undef OCLIMG2_DECL
#define OCLIMG2_DEF(Op, mask, key) {#Op, "OPENCL", mask, key, oclimg_k_##Op, NULL, 0},

#endif
