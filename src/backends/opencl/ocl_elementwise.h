/*
 * Private glue between the OpenCL elementwise files: ocl_elementwise.c (broadcasting binary ops, Where,
 * the variadic folds, the kernel table), ocl_elementwise_unary.c (the unary ops of the elementwise and
 * math groups) and ocl_elementwise_cast.c (Cast). Shared: the kernel-source prelude that maps a dtype
 * to storage / compute types, build options, the broadcast plan and small host helpers.
 */
#ifndef WF_OCL_ELEMENTWISE_H
#define WF_OCL_ELEMENTWISE_H

#include "backends/opencl/ocl.h"

/* Kernel-source prelude. A program is built once per dtype with -DDT=<wf_dtype>: ST is the storage
 * type, CT the type computed in (float for f16 and bf16, as the CPU kernels do), UT an unsigned type at
 * least as wide as uint for wrapping integer arithmetic, PT the type of float parameters, K(x) a
 * floating literal of CT's precision. f16 needs no cl_khr_fp16: vload_half / vstore_half_rte are core
 * OpenCL 1.2 and take half pointers. bf16 is ushort with the CPU's round-to-nearest-even store. Every
 * macro is one line, so the C string needs no line continuations. */
#define OCLEW_PRELUDE                                                                                              \
    "#ifdef HAS_FP64\n"                                                                                            \
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"                                                              \
    "#endif\n"                                                                                                     \
    "float bf_ld(ushort h) { return as_float((uint)h << 16); }\n"                                                  \
    "ushort bf_st(float f) {\n"                                                                                    \
    "  uint u = as_uint(f);\n"                                                                                     \
    "  return (u & 0x7fffffffu) > 0x7f800000u ? (ushort)((u >> 16) | 0x40u)\n"                                     \
    "                                         : (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"               \
    "}\n"                                                                                                          \
    "#ifdef DT\n"                                                                                                  \
    "#if DT == 1\n#define ST float\n#define IS_FLT 1\n"                                                            \
    "#elif DT == 2\n#define ST double\n#define IS_FLT 1\n"                                                         \
    "#elif DT == 3\n#define ST half\n#define CT float\n#define IS_FLT 1\n#define IS_HALF 1\n"                      \
    "#elif DT == 4\n#define ST ushort\n#define CT float\n#define IS_FLT 1\n#define IS_HALF 1\n"                    \
    "#elif DT == 5\n#define ST char\n#define UT uint\n#define IS_SINT 1\n#define TMIN (-128)\n#define TMAX 127\n"  \
    "#elif DT == 6\n#define ST uchar\n#define UT uint\n#define IS_U8 1\n#define TMIN 0\n#define TMAX 255\n"         \
    "#elif DT == 7\n#define ST short\n#define UT uint\n#define IS_SINT 1\n#define TMIN (-32768)\n"                  \
    "#define TMAX 32767\n"                                                                                         \
    "#elif DT == 8\n#define ST int\n#define UT uint\n#define IS_SINT 1\n#define TMIN (-2147483647 - 1)\n"          \
    "#define TMAX 2147483647\n"                                                                                    \
    "#elif DT == 9\n#define ST long\n#define UT ulong\n#define IS_SINT 1\n"                                        \
    "#define TMIN (-9223372036854775807L - 1)\n#define TMAX 9223372036854775807L\n"                               \
    "#elif DT == 10\n#define ST uchar\n#define UT uint\n#define IS_BOOL 1\n"                                       \
    "#endif\n"                                                                                                     \
    "#ifndef CT\n#define CT ST\n#endif\n"                                                                          \
    "#if defined(IS_SINT) || defined(IS_U8)\n#define IS_INT 1\n#endif\n"                                           \
    "#if DT == 2\n#define PT double\n#define K(x) x\n#else\n#define PT float\n#define K(x) x##f\n#endif\n"          \
    "#if DT == 3\n"                                                                                                \
    "#define LD(p, i) vload_half((i), (p))\n"                                                                      \
    "#define STO(p, i, v) vstore_half_rte((v), (i), (p))\n"                                                        \
    "#elif DT == 4\n"                                                                                              \
    "#define LD(p, i) bf_ld((p)[i])\n"                                                                             \
    "#define STO(p, i, v) ((p)[i] = bf_st(v))\n"                                                                   \
    "#else\n"                                                                                                      \
    "#define LD(p, i) ((p)[i])\n"                                                                                  \
    "#define STO(p, i, v) ((p)[i] = (ST)(v))\n"                                                                    \
    "#endif\n"                                                                                                     \
    "#endif\n"

/* The floating-point elementwise ops in OpenCL C, one table for the single-op kernels and the
 * generated ones (ocl_fused.c): X(kernel suffix, graph op, expression). Binary expressions read x and
 * y, unary ones v and their parameters pa and pb; all compute in CT and follow
 * src/backends/cpu/k_elementwise*.c and k_math.c. The sources they need first: OCLEW_FLT_HELPERS. */
#define OCLEW_FLT_HELPERS                                                                                          \
    /* NaN wins, as numpy.maximum / minimum: fmax / fmin would drop it */                                          \
    "#define MAXF(x, y) (((x) >= (y) || (x) != (x)) ? (x) : (y))\n"                                                \
    "#define MINF(x, y) (((x) <= (y) || (x) != (x)) ? (x) : (y))\n"                                                \
    /* numpy.clip order: max with lo first, then min with hi; NaN passes */                                       \
    "#define CLIPV(v, lo, hi) (((v) < (lo) ? (lo) : (v)) > (hi) ? (hi) : ((v) < (lo) ? (lo) : (v)))\n"             \
    /* clamps as selects so that NaN passes, as numpy.maximum / minimum do in ONNX's reference */                 \
    "CT clamp01(CT t) { t = t > (CT)1 ? (CT)1 : t; return t < (CT)0 ? (CT)0 : t; }\n"
#define OCLEW_BIN_FLT(X)                                                                                           \
    X(add, "Add", "x + y") X(sub, "Sub", "x - y") X(mul, "Mul", "x * y") X(div, "Div", "x / y")                    \
    X(max, "Maximum", "MAXF(x, y)") X(min, "Minimum", "MINF(x, y)")
/* Sigmoid and Swish take exp of a non-positive value only, e/(1+e) below 0, as the CPU's (k_vmath.h): the
 * negative tail's tiny values are not flushed to 0 by exp(-v) overflowing (cases sigmoid_tail, swish_tail_*). */
#define OCLEW_UN_FLT(X)                                                                                            \
    X(neg, "Neg", "-v") X(abs, "Abs", "fabs(v)")                                                                   \
    X(sign, "Sign", "v > 0 ? (CT)1 : v < 0 ? (CT)-1 : v") /* 0, -0 and NaN map to themselves */                   \
    X(square, "Square", "v * v") X(relu, "Relu", "v < 0 ? (CT)0 : v") /* NaN passes, like maximum(x, 0) */        \
    X(exp, "Exp", "exp(v)") X(log, "Log", "log(v)") X(sqrt, "Sqrt", "sqrt(v)") X(rsqrt, "Rsqrt", "(CT)1 / sqrt(v)") \
    X(recip, "Reciprocal", "(CT)1 / v") X(tanh, "Tanh", "tanh(v)") X(sigmoid, "Sigmoid", "v >= 0 ? (CT)1 / ((CT)1 + exp(-v)) : exp(v) / ((CT)1 + exp(v))") \
    X(leaky, "LeakyRelu", "v < 0 ? pa * v : v") X(elu, "Elu", "v < 0 ? pa * expm1(v) : v")                         \
    /* erfc keeps precision for large negative x, where 1 + erf cancels */                                         \
    X(gelu, "Gelu", "K(0.5) * v * erfc(-v * K(0.70710678118654752))")                                              \
    /* 0.5 * (1 + tanh(z)) == 1 / (1 + e^-2z), without 1 + tanh's cancellation (Gelu, approximate tanh) */       \
    X(gelut, "", "v / ((CT)1 + exp(K(-2.0) * (K(0.7978845608028654) * (v + K(0.044715) * v * v * v))))")           \
    X(erf, "Erf", "erf(v)") X(softplus, "Softplus", "(v > 0 ? v : (CT)0) + log1p(exp(-fabs(v)))")                  \
    X(floor, "Floor", "floor(v)") X(ceil, "Ceil", "ceil(v)") X(round, "Round", "rint(v)") /* ties to even */      \
    X(clip, "Clip", "CLIPV(v, (CT)pa, (CT)pb)")
/* the math group's activations the generated kernels take */
#define OCLEW_ACT_FLT(X)                                                                                           \
    X(hsig, "HardSigmoid", "clamp01(pa * v + pb)") X(hswish, "HardSwish", "v * clamp01(v * ((CT)1 / (CT)6) + K(0.5))") \
    X(swish, "Swish", "v * (pa * v >= 0 ? (CT)1 / ((CT)1 + exp(-pa * v)) : exp(pa * v) / ((CT)1 + exp(pa * v)))")

/* Build options for a program specialised to dtype t (0: none). Division and sqrt are correctly
 * rounded, as on the CPU; no fast-math flag is ever given, so NaN and infinities keep IEEE meaning. */
void oclew_opts(const wf__kctx *k, wf_dtype t, char *buf, size_t n);

/* Kernel k_<name> of a program specialised to dtype t (WF_DTYPE_INVALID: none), built on first use.
 * Kernels carry the k_ prefix so that their names never clash with built-ins (min, tanh, ...). */
wf_status *oclew_kernel(wf__kctx *k, const char *prog, const char *src, wf_dtype t, const char *name, cl_kernel *out);

static inline bool oclew_is_half(wf_dtype t) { return t == WF_F16 || t == WF_BF16; }
static inline bool oclew_is_float(wf_dtype t) { return t == WF_F32 || t == WF_F64 || oclew_is_half(t); }
static inline bool oclew_is_int(wf_dtype t) { return t >= WF_I8 && t <= WF_I64; }

/* A tensor's whole contents copied to host memory (blocking; for small tensors: bounds, divisors).
 * *out is freed with ocl_host->free. */
wf_status *oclew_read(wf__kctx *k, const wf_tensor *t, void **out);
/* Element i of a host buffer of dtype t, as a double / an int64 (floats truncate toward zero). */
double oclew_load_f64(const void *p, wf_dtype t, int64_t i);
int64_t oclew_load_i64(const void *p, wf_dtype t, int64_t i);
/* "f32", "i64", ... */
const char *oclew_dtype_name(wf_dtype t);

/* Unary kernels (ocl_elementwise_unary.c): X(Op, dtype mask); the kernel is oclew_k_<Op>. */
#define OCLEW_UNARY_OPS(X)                                                                                         \
    X(Neg, WF__DT_NUMERIC) X(Abs, WF__DT_NUMERIC) X(Sign, WF__DT_NUMERIC) X(Square, WF__DT_NUMERIC)                 \
    X(Relu, WF__DT_NUMERIC) X(Exp, WF__DT_FLOATS) X(Log, WF__DT_FLOATS) X(Sqrt, WF__DT_FLOATS)                       \
    X(Rsqrt, WF__DT_FLOATS) X(Reciprocal, WF__DT_FLOATS) X(Tanh, WF__DT_FLOATS) X(Sigmoid, WF__DT_FLOATS)            \
    X(LeakyRelu, WF__DT_FLOATS) X(Elu, WF__DT_FLOATS) X(Gelu, WF__DT_FLOATS) X(Erf, WF__DT_FLOATS)                  \
    X(Softplus, WF__DT_FLOATS) X(Floor, WF__DT_FLOATS) X(Ceil, WF__DT_FLOATS) X(Round, WF__DT_FLOATS)               \
    X(Clip, WF__DT_NUMERIC) X(Not, WF__DT_BIT(WF_BOOL)) X(Sin, WF__DT_FLOATS) X(Cos, WF__DT_FLOATS)                 \
    X(Tan, WF__DT_FLOATS) X(Asin, WF__DT_FLOATS) X(Acos, WF__DT_FLOATS) X(Atan, WF__DT_FLOATS)                      \
    X(Sinh, WF__DT_FLOATS) X(Cosh, WF__DT_FLOATS) X(Asinh, WF__DT_FLOATS) X(Acosh, WF__DT_FLOATS)                   \
    X(Atanh, WF__DT_FLOATS) X(IsNaN, WF__DT_FLOATS) X(IsInf, WF__DT_FLOATS) X(HardSigmoid, WF__DT_FLOATS)           \
    X(HardSwish, WF__DT_FLOATS) X(Selu, WF__DT_FLOATS) X(Celu, WF__DT_FLOATS) X(Mish, WF__DT_FLOATS)                \
    X(Softsign, WF__DT_FLOATS) X(ThresholdedRelu, WF__DT_FLOATS) X(Shrink, WF__DT_NUMERIC)                          \
    X(Swish, WF__DT_FLOATS) X(BitwiseNot, WF__DT_INTS)

#define OCLEW_DECL_(Op, mask) wf_status *oclew_k_##Op(wf__kctx *k);
OCLEW_UNARY_OPS(OCLEW_DECL_)
#undef OCLEW_DECL_

/* ocl_elementwise_cast.c */
wf_status *oclew_k_Cast(wf__kctx *k);

#endif
