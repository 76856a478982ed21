/*
 * Private glue of the OpenCL nn and reduce families (ocl_nn.c, ocl_nn_conv.c, ocl_reduce.c): the kernel
 * source prelude that makes one program text serve every dtype (built with -DDT_xxx), build options,
 * small host helpers (reading a tiny device tensor back, names for messages) and the conv/pool kernels
 * that ocl_nn.c lists in its table.
 */
#ifndef WF_OCL_NNR_H
#define WF_OCL_NNR_H

#include "backends/opencl/ocl.h"

/* Every family program starts with this. T is the storage type, CT the compute type (float for the
 * 16-bit floats, which round once on store), DBL the widest float the device has (for accumulators),
 * LD/ST load and store one element through CT. half goes through vload_half/vstore_half_rte, which
 * OpenCL 1.2 has without cl_khr_fp16; bf16 is ushort with round-to-nearest-even on store. */
#define OCL_NNR_PRELUDE                                                                                        \
    "#ifdef HAS_F64\n"                                                                                          \
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"                                                           \
    "typedef double DBL;\n"                                                                                     \
    "#else\n"                                                                                                   \
    "typedef float DBL;\n"                                                                                      \
    "#endif\n"                                                                                                  \
    "float bf2f(ushort h) { return as_float((uint)h << 16); }\n"                                                \
    "ushort f2bf(float f) {\n"                                                                                  \
    "  uint u = as_uint(f);\n"                                                                                  \
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);\n"                             \
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"                                                                      \
    "  return (ushort)(u >> 16);\n"                                                                             \
    "}\n"                                                                                                       \
    "#if defined(DT_F32)\n"                                                                                     \
    "typedef float T; typedef float CT;\n"                                                                      \
    "#elif defined(DT_F64)\n"                                                                                   \
    "typedef double T; typedef double CT;\n"                                                                    \
    "#elif defined(DT_F16)\n"                                                                                   \
    "typedef half T; typedef float CT;\n"                                                                       \
    "#define LD(p, i) vload_half((i), (p))\n"                                                                   \
    "#define ST(p, i, v) vstore_half_rte((CT)(v), (i), (p))\n"                                                  \
    "#elif defined(DT_BF16)\n"                                                                                  \
    "typedef ushort T; typedef float CT;\n"                                                                     \
    "#define LD(p, i) bf2f((p)[i])\n"                                                                           \
    "#define ST(p, i, v) ((p)[i] = f2bf((CT)(v)))\n"                                                            \
    "#elif defined(DT_I8)\n"                                                                                    \
    "typedef char T; typedef long CT;\n#define TMIN CHAR_MIN\n#define TMAX CHAR_MAX\n"                         \
    "#elif defined(DT_U8)\n"                                                                                    \
    "typedef uchar T; typedef long CT;\n#define TMIN 0\n#define TMAX UCHAR_MAX\n"                              \
    "#elif defined(DT_I16)\n"                                                                                   \
    "typedef short T; typedef long CT;\n#define TMIN SHRT_MIN\n#define TMAX SHRT_MAX\n"                         \
    "#elif defined(DT_I32)\n"                                                                                   \
    "typedef int T; typedef long CT;\n#define TMIN INT_MIN\n#define TMAX INT_MAX\n"                              \
    "#elif defined(DT_I64)\n"                                                                                   \
    "typedef long T; typedef long CT;\n#define TMIN LONG_MIN\n#define TMAX LONG_MAX\n"                           \
    "#endif\n"                                                                                                  \
    "#if defined(DT_I8) || defined(DT_U8) || defined(DT_I16) || defined(DT_I32) || defined(DT_I64)\n"          \
    "#define IS_INT 1\n"                                                                                        \
    "#define ISNAN(v) 0\n"                                                                                      \
    "#else\n"                                                                                                   \
    "#define ISNAN(v) isnan(v)\n"                                                                               \
    "#endif\n"                                                                                                  \
    "#ifndef LD\n"                                                                                              \
    "#define LD(p, i) ((CT)(p)[i])\n"                                                                           \
    "#define ST(p, i, v) ((p)[i] = (T)(v))\n"                                                                   \
    "#endif\n"

/* "-DDT_F32 -DHAS_F64" and the like, for dtype t on k's device (buf of at least 64 bytes). */
const char *ocl_nnr_opts(const wf__kctx *k, wf_dtype t, char *buf);
/* The kernel `name` of a family program (prog, src) built for dtype t. */
wf_status *ocl_nnr_kernel(wf__kctx *k, const char *prog, const char *src, wf_dtype t, const char *name,
                          cl_kernel *out);
/* Copies a small tensor (host or device) into dst; bytes must not exceed the tensor's. */
wf_status *ocl_nnr_read(wf__kctx *k, const wf_tensor *t, void *dst, size_t bytes);
/* Element i of a small i32/i64 tensor already read to the host. */
int64_t ocl_nnr_int_at(const void *p, wf_dtype t, int64_t i);
/* "f32[2,3]" into buf (at least 160 bytes). */
const char *ocl_nnr_tstr(const wf_tensor *t, char *buf);
const char *ocl_nnr_dtname(wf_dtype t);
/* Whether dtype t has a floating-point type (kernels with a double accumulator need the device's fp64
 * only as a refinement: DBL falls back to float). */
bool ocl_nnr_is_float(wf_dtype t);
/* Sets the device's DBL argument (double with fp64, else float) from v. */
typedef struct ocl_nnr_dbl {
    union {
        cl_double d;
        cl_float f;
    } v;
    size_t size;
} ocl_nnr_dbl;
ocl_nnr_dbl ocl_nnr_dbl_of(const wf__kctx *k, double v);
#define OCL_DBL(x) ((ocl_arg){(x).size, &(x).v})

/* Kernels of ocl_nn_conv.c, listed in ocl_nn.c's table. */
wf_status *ocl_nn_k_conv(wf__kctx *k);
wf_status *ocl_nn_k_convt(wf__kctx *k);
wf_status *ocl_nn_k_pool(wf__kctx *k);
wf_status *ocl_nn_k_global_avg_pool(wf__kctx *k);

#endif
