/*
 * OpenCL kernels of the broadcasting elementwise ops (arithmetic, Mod, comparisons, logic, Where, PRelu,
 * BitShift, the bitwise ops, the variadic Sum/Mean/Max/Min) and the elementwise kernel table. numpy
 * broadcasting runs in the kernel over a host-coalesced plan of up to 8 dims; semantics follow
 * src/backends/cpu/k_elementwise.c and k_math_bcast.c.
 */
#include <math.h>
#include <stdio.h>

#include "backends/opencl/ocl_elementwise.h"
#include "ops/kutil_elementwise.h"

/* ---- kernel source -------------------------------------------------------------------------------- */

/* The broadcast plan a kernel receives by value: output dims (coalesced, innermost last) and each
 * input's stride in elements per dim (0: broadcast). rank 1 is the same-shape / scalar fast path with
 * no index arithmetic; `small` says every index fits 32 bits, where division is much cheaper. */
#define BC_SRC                                                                                                     \
    "typedef struct { long dims[8]; long st[3][8]; int rank; int small; } bc_t;\n"                                 \
    "void bc_offs(const bc_t *b, ulong i, int n, long *o) {\n"                                                     \
    "  o[0] = o[1] = o[2] = 0;\n"                                                                                  \
    "  if (b->rank == 1) { for (int k = 0; k < n; k++) o[k] = (long)i * b->st[k][0]; return; }\n"                  \
    "  if (b->small) {\n"                                                                                          \
    "    uint r = (uint)i;\n"                                                                                      \
    "    for (int d = b->rank - 1; d >= 0; d--) {\n"                                                               \
    "      uint n_d = (uint)b->dims[d], c = r % n_d;\n"                                                            \
    "      r /= n_d;\n"                                                                                            \
    "      for (int k = 0; k < n; k++) o[k] += (long)c * b->st[k][d];\n"                                           \
    "    }\n"                                                                                                      \
    "  } else {\n"                                                                                                 \
    "    ulong r = i;\n"                                                                                           \
    "    for (int d = b->rank - 1; d >= 0; d--) {\n"                                                               \
    "      ulong n_d = (ulong)b->dims[d], c = r % n_d;\n"                                                          \
    "      r /= n_d;\n"                                                                                            \
    "      for (int k = 0; k < n; k++) o[k] += (long)c * b->st[k][d];\n"                                           \
    "    }\n"                                                                                                      \
    "  }\n"                                                                                                        \
    "}\n"

#define BIN_LINE_(n, op, e) "BIN_T(" #n ", " e ")\n"

/* Binary ops for one dtype. x and y are the operands in CT. Integer division and remainder give 0 for a
 * zero divisor (check_b's kernel has failed the run then) and take -1 on a separate path, so that
 * MIN / -1 neither traps nor needs to be speculated. */
static const char *g_bin_src =
    OCLEW_PRELUDE BC_SRC
    "#define BIN_T(n, E) __kernel void k_##n(__global const ST *pa, ulong ao, __global const ST *pb, ulong bo, "
    "__global ST *py, ulong yo, bc_t bc) { ulong i = get_global_id(0); long o[3]; bc_offs(&bc, i, 2, o); "
    "CT x = LD(pa, ao + o[0]); CT y = LD(pb, bo + o[1]); STO(py, yo + i, (E)); }\n"
    "#define BIN_B(n, E) __kernel void k_##n(__global const ST *pa, ulong ao, __global const ST *pb, ulong bo, "
    "__global uchar *py, ulong yo, bc_t bc) { ulong i = get_global_id(0); long o[3]; bc_offs(&bc, i, 2, o); "
    "CT x = LD(pa, ao + o[0]); CT y = LD(pb, bo + o[1]); py[yo + i] = (uchar)(E); }\n"
    "BIN_B(eq, x == y)\n"
    "BIN_B(ne, x != y)\n"
    "BIN_B(lt, x < y)\n"
    "BIN_B(le, x <= y)\n"
    "BIN_B(gt, x > y)\n"
    "BIN_B(ge, x >= y)\n"
    "#ifdef IS_BOOL\n"
    "BIN_T(and, (x != 0) & (y != 0))\n"
    "BIN_T(or, (x != 0) | (y != 0))\n"
    "BIN_T(xor, (x != 0) ^ (y != 0))\n"
    "#endif\n"
    "#ifdef IS_FLT\n"
    OCLEW_FLT_HELPERS
    /* Python / numpy.mod: the result takes the divisor's sign */
    "CT pymod(CT x, CT y) {\n"
    "  CT r = fmod(x, y);\n"
    "  return r != 0 ? (((r < 0) != (y < 0)) ? r + y : r) : copysign((CT)0, y);\n"
    "}\n"
    OCLEW_BIN_FLT(BIN_LINE_)
    "BIN_T(pow, pow(x, y))\n"
    "BIN_T(mod, pymod(x, y))\n"
    "BIN_T(fmod, fmod(x, y))\n"
    "BIN_T(prelu, x > 0 ? x : x * y)\n"
    "#ifdef IS_HALF\n"
    /* f16 / bf16 folds (Sum, Mean, Max, Min) accumulate in f32 and round once at the end, like the CPU */
    "#define FOLD1(n, E) __kernel void k_##n(__global const ST *pa, ulong ao, __global const ST *pb, ulong bo, "
    "__global float *py, ulong yo, bc_t bc) { ulong i = get_global_id(0); long o[3]; bc_offs(&bc, i, 2, o); "
    "float x = LD(pa, ao + o[0]); float y = LD(pb, bo + o[1]); py[yo + i] = (E); }\n"
    "#define FOLDN(n, E) __kernel void k_##n(__global const float *pa, ulong ao, __global const ST *pb, ulong bo, "
    "__global float *py, ulong yo, bc_t bc) { ulong i = get_global_id(0); long o[3]; bc_offs(&bc, i, 2, o); "
    "float x = pa[ao + o[0]]; float y = LD(pb, bo + o[1]); py[yo + i] = (E); }\n"
    "FOLD1(f1_add, x + y)\n"
    "FOLD1(f1_max, MAXF(x, y))\n"
    "FOLD1(f1_min, MINF(x, y))\n"
    "FOLDN(fn_add, x + y)\n"
    "FOLDN(fn_max, MAXF(x, y))\n"
    "FOLDN(fn_min, MINF(x, y))\n"
    "__kernel void k_ffin(__global const float *pa, __global ST *py, ulong yo, float div) {\n"
    "  ulong i = get_global_id(0);\n"
    "  STO(py, yo + i, pa[i] / div);\n"
    "}\n"
    "#else\n"
    "__kernel void k_mdiv(__global ST *py, ulong yo, CT div) {\n"
    "  ulong i = get_global_id(0);\n"
    "  py[yo + i] = py[yo + i] / div;\n"
    "}\n"
    "#endif\n"
    "#endif\n"
    "#ifdef IS_INT\n"
    "#define BITS ((UT)(sizeof(ST) * 8))\n"
    /* integer powers by squaring in 64-bit unsigned arithmetic: wraps like numpy */
    "ulong ipow(ulong b, ulong e) { ulong r = 1; while (e) { if (e & 1) r *= b; b *= b; e >>= 1; } return r; }\n"
    "BIN_T(add, (UT)x + (UT)y)\n"
    "BIN_T(sub, (UT)x - (UT)y)\n"
    "BIN_T(mul, (UT)x * (UT)y)\n"
    "BIN_T(pow, ipow((ulong)(long)x, (ulong)(long)y))\n"
    "BIN_T(max, x > y ? x : y)\n"
    "BIN_T(min, x < y ? x : y)\n"
    "BIN_T(prelu, x > 0 ? x : (ST)((UT)x * (UT)y))\n"
    "BIN_T(band, x & y)\n"
    "BIN_T(bor, x | y)\n"
    "BIN_T(bxor, x ^ y)\n"
    /* BitShift (opset 28): an amount < 0 or >= the width leaves only the sign fill */
    "BIN_T(shl, (UT)y >= BITS ? (UT)0 : (UT)x << (UT)y)\n"
    "#ifdef IS_SINT\n"
    "ST idiv(ST x, ST y) { if (y == 0) return 0; if (y == -1) return (ST)((UT)0 - (UT)x); return x / y; }\n"
    "ST imod(ST x, ST y) {\n"
    "  if (y == -1 || y == 0) return 0;\n"
    "  ST r = x % y;\n"
    "  return (r != 0 && ((r < 0) != (y < 0))) ? (ST)(r + y) : r;\n"
    "}\n"
    "ST ifmod(ST x, ST y) { if (y == -1 || y == 0) return 0; return x % y; }\n"
    "BIN_T(div, idiv(x, y))\n"
    "BIN_T(mod, imod(x, y))\n"
    "BIN_T(fmod, ifmod(x, y))\n"
    "BIN_T(shr, (UT)y >= BITS ? (x < 0 ? -1 : 0) : x >> y)\n"
    "#else\n"
    "BIN_T(div, y == 0 ? 0 : x / y)\n"
    "BIN_T(mod, y == 0 ? 0 : x % y)\n"
    "BIN_T(fmod, y == 0 ? 0 : x % y)\n"
    "BIN_T(shr, y >= 8 ? 0 : x >> y)\n"
    "#endif\n"
    "#endif\n";

/* Where moves bits: one kernel per element size serves every dtype. */
static const char *g_where_src =
    BC_SRC
    "#define WH(n, T) __kernel void k_##n(__global const uchar *pc, ulong co, __global const T *px, ulong xo, "
    "__global const T *py, ulong yo, __global T *pz, ulong zo, bc_t bc) { ulong i = get_global_id(0); long o[3]; "
    "bc_offs(&bc, i, 3, o); pz[zo + i] = pc[co + o[0]] ? px[xo + o[1]] : py[yo + o[2]]; }\n"
    "WH(where_1, uchar)\n"
    "WH(where_2, ushort)\n"
    "WH(where_4, uint)\n"
    "WH(where_8, ulong)\n";

/* ---- shared host helpers ---------------------------------------------------------------------------- */

void oclew_opts(const wf__kctx *k, wf_dtype t, char *buf, size_t n)
{
    int len = snprintf(buf, n, "-cl-fp32-correctly-rounded-divide-sqrt%s", ocl_of(k)->fp64 ? " -DHAS_FP64" : "");
    if (t != WF_DTYPE_INVALID && len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, " -DDT=%d", (int)t);
}

wf_status *oclew_read(wf__kctx *k, const wf_tensor *t, void **out)
{
    size_t bytes = (size_t)t->size * ocl_size(t->dtype);
    if (t->data) { /* a host tensor (a host-memory argument): nothing to read back */
        void *copy = ocl_host->malloc(bytes ? bytes : 1);
        if (!copy) return ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory copying %zu bytes", bytes);
        if (bytes) memcpy(copy, t->data, bytes);
        *out = copy;
        return NULL;
    }
    if (bytes && ocl_of(k)->no_readback)
        return ocl_host->kctx_fail(k, WF_FAILED_PRECONDITION, "reads %zu bytes of an input back from %s "
                                   "(WEFT_OCL_NO_READBACK is set)", bytes, k->device->short_name);
    void *buf = ocl_host->malloc(bytes ? bytes : 1);
    if (!buf) return ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory reading back %zu bytes", bytes);
    if (bytes) {
        cl_int st = clEnqueueReadBuffer(ocl_of(k)->q, ocl_mem(t), CL_TRUE, t->dev_offset, bytes, buf, 0, NULL, NULL);
        if (st != CL_SUCCESS) {
            ocl_host->free(buf);
            return ocl_fail(k, st, "read-back of an operand");
        }
    }
    *out = buf;
    return NULL;
}

static float f16_to_f32(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m | 0x400u), (int)e - 25);
    return h & 0x8000u ? -v : v;
}

double oclew_load_f64(const void *p, wf_dtype t, int64_t i)
{
    switch (t) {
    case WF_F32: return ((const float *)p)[i];
    case WF_F64: return ((const double *)p)[i];
    case WF_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case WF_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: {
        int64_t v;
        return wf__ku_load_int(p, t, i, &v) ? (double)v : 0;
    }
    }
}

int64_t oclew_load_i64(const void *p, wf_dtype t, int64_t i)
{
    int64_t v;
    if (wf__ku_load_int(p, t, i, &v)) return v;
    double d = oclew_load_f64(p, t, i);
    if (d != d) return 0;
    return d <= -9.2233720368547758e18 ? INT64_MIN : d >= 9.2233720368547758e18 ? INT64_MAX : (int64_t)d;
}

const char *oclew_dtype_name(wf_dtype t)
{
    static const char *const names[] = {"invalid", "f32", "f64", "f16", "bf16", "i8",
                                        "u8",      "i16", "i32", "i64", "bool"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "invalid";
}

/* ---- broadcast plan ------------------------------------------------------------------------------ */

/* Matches bc_t in the kernel source: longs first, so there is no padding on either side. */
typedef struct bc_t {
    cl_long dims[8];
    cl_long st[3][8];
    cl_int rank;
    cl_int small;
} bc_t;

typedef struct shape {
    int rank;
    const int64_t *dims;
} shape;

static shape shape_of(const wf_tensor *t) { return (shape){t->rank, t->dims}; }

/* numpy broadcasting of n shapes (inference has checked them already). */
static void bcast_shape(int n, const shape *in, int *rank, int64_t *dims)
{
    int ranks[64]; /* fold's variadic inputs: at most 64 */
    const int64_t *d[64];
    for (int i = 0; i < n; i++) ranks[i] = in[i].rank, d[i] = in[i].dims;
    (void)wf__ku_bcast_dims(n, ranks, d, rank, dims);
}

static void plan_make(bc_t *p, int n, const shape *in, int orank, const int64_t *odims)
{
    int ranks[3];
    const int64_t *id[3];
    for (int i = 0; i < n; i++) ranks[i] = in[i].rank, id[i] = in[i].dims;
    int64_t dims[WF_MAX_RANK], st[3][WF_MAX_RANK];
    int r = wf__ku_bcast_walk(n, ranks, id, orank, odims, dims, st);
    memset(p, 0, sizeof *p);
    p->rank = r;
    int64_t total = 1;
    for (int d = 0; d < r; d++) {
        p->dims[d] = dims[d];
        total *= dims[d];
        for (int i = 0; i < n; i++) p->st[i][d] = st[i][d];
    }
    p->small = total <= (int64_t)UINT32_MAX;
}

/* ---- binary ops ------------------------------------------------------------------------------------ */

enum { CHECK_NONE, CHECK_ZERO, CHECK_NEG };

wf_status *oclew_kernel(wf__kctx *k, const char *prog, const char *src, wf_dtype t, const char *name, cl_kernel *out)
{
    char opts[160], full[64];
    oclew_opts(k, t, opts, sizeof opts);
    snprintf(full, sizeof full, "k_%s", name);
    return ocl_kernel(k, prog, src, opts, full, out);
}

/* A zero integer divisor or a negative integer exponent fails the run, as on the CPU (whose message
 * names the element): a kernel checks b on the device and reports to the error record, nothing is read
 * back. The arithmetic kernels that run after it never trap on a zero divisor. */
static wf_status *check_b(wf__kctx *k, int check, const wf_tensor *b)
{
    if (check == CHECK_NONE || !oclew_is_int(b->dtype) || (check == CHECK_NEG && b->dtype == WF_U8)) return NULL;
    if (check == CHECK_ZERO)
        return ocl_check_ints(k, b, OCL_SITE_DIV_ZERO, 0, 0, true, NULL, 0, oclew_dtype_name(b->dtype));
    return ocl_check_ints(k, b, OCL_SITE_NEG_POW, INT64_MIN, -1, true, NULL, 0, "");
}

/* y = name(a, b) over the broadcast of a's and b's shapes; a, b, y are (buffer, element offset). */
static wf_status *launch_bin(wf__kctx *k, cl_kernel kern, cl_mem am, cl_ulong ao, shape as, cl_mem bm, cl_ulong bo,
                             shape bs, cl_mem ym, cl_ulong yo, int orank, const int64_t *odims, size_t n)
{
    bc_t bc;
    shape in[2] = {as, bs};
    plan_make(&bc, 2, in, orank, odims);
    ocl_arg args[] = {OCL_ARG(am), OCL_ARG(ao), OCL_ARG(bm), OCL_ARG(bo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(bc)};
    return ocl_launch(k, kern, 7, args, 1, &n, NULL);
}

static wf_status *binary(wf__kctx *k, const char *name, bool out_bool, int check)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    wf_dtype t = a->dtype;
    if (b->dtype != t)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input dtypes differ: %s and %s", oclew_dtype_name(t),
                                   oclew_dtype_name(b->dtype));
    wf_status *s = check_b(k, check, b);
    if (s) return s;
    shape in[2] = {shape_of(a), shape_of(b)};
    int rank;
    int64_t dims[WF_MAX_RANK];
    bcast_shape(2, in, &rank, dims);
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, out_bool ? WF_BOOL : t, rank, dims, &y))) return s;
    cl_kernel kern;
    if ((s = oclew_kernel(k, "elementwise-binary", g_bin_src, t, name, &kern))) return s;
    return launch_bin(k, kern, ocl_mem(a), ocl_off(a), in[0], ocl_mem(b), ocl_off(b), in[1], ocl_mem(y), ocl_off(y),
                      rank, dims, (size_t)y->size);
}

#define BINK_(Op, name, out_bool, check)                                                                           \
    static wf_status *k_##Op(wf__kctx *k) { return binary(k, name, out_bool, check); }
BINK_(Add, "add", false, CHECK_NONE)
BINK_(Sub, "sub", false, CHECK_NONE)
BINK_(Mul, "mul", false, CHECK_NONE)
BINK_(Div, "div", false, CHECK_ZERO)
BINK_(Pow, "pow", false, CHECK_NEG)
BINK_(Maximum, "max", false, CHECK_NONE)
BINK_(Minimum, "min", false, CHECK_NONE)
BINK_(Equal, "eq", true, CHECK_NONE)
BINK_(NotEqual, "ne", true, CHECK_NONE)
BINK_(Less, "lt", true, CHECK_NONE)
BINK_(LessEqual, "le", true, CHECK_NONE)
BINK_(Greater, "gt", true, CHECK_NONE)
BINK_(GreaterEqual, "ge", true, CHECK_NONE)
BINK_(And, "and", false, CHECK_NONE)
BINK_(Or, "or", false, CHECK_NONE)
BINK_(Xor, "xor", false, CHECK_NONE)
BINK_(PRelu, "prelu", false, CHECK_NONE)
BINK_(BitwiseAnd, "band", false, CHECK_NONE)
BINK_(BitwiseOr, "bor", false, CHECK_NONE)
BINK_(BitwiseXor, "bxor", false, CHECK_NONE)
#undef BINK_

static wf_status *k_Mod(wf__kctx *k)
{
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, "fmod");
    return binary(k, a && a->i ? "fmod" : "mod", false, CHECK_ZERO);
}

static wf_status *k_BitShift(wf__kctx *k)
{
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, "direction");
    return binary(k, a && a->s && !strcmp(a->s, "LEFT") ? "shl" : "shr", false, CHECK_NONE);
}

/* ---- Where --------------------------------------------------------------------------------------- */

static wf_status *k_Where(wf__kctx *k)
{
    const wf_tensor *c = k->in[0], *x = k->in[1], *yv = k->in[2];
    if (c->dtype != WF_BOOL || x->dtype != yv->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "expects (bool, T, T) inputs");
    shape in[3] = {shape_of(c), shape_of(x), shape_of(yv)};
    int rank;
    int64_t dims[WF_MAX_RANK];
    bcast_shape(3, in, &rank, dims);
    wf_tensor *z;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, rank, dims, &z);
    if (s) return s;
    size_t es = ocl_size(x->dtype);
    const char *name = es == 1 ? "where_1" : es == 2 ? "where_2" : es == 4 ? "where_4" : "where_8";
    cl_kernel kern;
    if ((s = oclew_kernel(k, "elementwise-where", g_where_src, WF_DTYPE_INVALID, name, &kern))) return s;
    bc_t bc;
    plan_make(&bc, 3, in, rank, dims);
    cl_mem cm = ocl_mem(c), xm = ocl_mem(x), ym = ocl_mem(yv), zm = ocl_mem(z);
    cl_ulong co = ocl_off(c), xo = ocl_off(x), yo = ocl_off(yv), zo = ocl_off(z);
    ocl_arg args[] = {OCL_ARG(cm), OCL_ARG(co), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym),
                      OCL_ARG(yo), OCL_ARG(zm), OCL_ARG(zo), OCL_ARG(bc)};
    size_t n = (size_t)z->size;
    return ocl_launch(k, kern, 9, args, 1, &n, NULL);
}

/* ---- variadic Sum, Mean, Max, Min ----------------------------------------------------------------- */

/* Folds op over the inputs left to right into the output (f16/bf16: into an f32 buffer rounded once at
 * the end, as the CPU does); Mean then divides by the count. Reading and writing the output in one
 * step is safe: each work item reads its own element of it before writing. */
static wf_status *fold(wf__kctx *k, const char *op, bool mean)
{
    wf_dtype t = k->in[0]->dtype;
    shape in[64];
    int n_in = k->n_in;
    if (n_in > 64) return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "more than 64 inputs on OpenCL");
    for (int i = 0; i < n_in; i++) {
        if (k->in[i]->dtype != t)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input dtypes differ: %s and %s (inputs 0 and %d)",
                                       oclew_dtype_name(t), oclew_dtype_name(k->in[i]->dtype), i);
        in[i] = shape_of(k->in[i]);
    }
    int rank;
    int64_t dims[WF_MAX_RANK];
    bcast_shape(n_in, in, &rank, dims);
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, t, rank, dims, &y);
    if (s) return s;
    size_t n = (size_t)y->size;
    if (n == 0) return NULL;
    ocl_dev *d = ocl_of(k);
    cl_mem ym = ocl_mem(y);
    cl_ulong yo = ocl_off(y);
    shape ys = {rank, dims};
    if (n_in == 1) {
        /* in place (the plan gave the output the input's bytes) there is nothing to copy: an
         * overlapping clEnqueueCopyBuffer is CL_MEM_COPY_OVERLAP */
        if (ocl_mem(k->in[0]) == ym && k->in[0]->dev_offset == y->dev_offset) return NULL;
        size_t es = ocl_size(t);
        cl_int st = clEnqueueCopyBuffer(d->q, ocl_mem(k->in[0]), ym, k->in[0]->dev_offset, y->dev_offset, n * es, 0,
                                        NULL, NULL);
        return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "buffer copy");
    }
    const wf_tensor *a = k->in[0], *b = k->in[1];
    char name[16];
    cl_kernel kern;
    if (!oclew_is_half(t)) {
        if ((s = oclew_kernel(k, "elementwise-binary", g_bin_src, t, op, &kern))) return s;
        if ((s = launch_bin(k, kern, ocl_mem(a), ocl_off(a), in[0], ocl_mem(b), ocl_off(b), in[1], ym, yo, rank, dims,
                            n)))
            return s;
        for (int i = 2; i < n_in; i++)
            if ((s = launch_bin(k, kern, ym, yo, ys, ocl_mem(k->in[i]), ocl_off(k->in[i]), in[i], ym, yo, rank, dims,
                                n)))
                return s;
        if (!mean) return NULL;
        if ((s = oclew_kernel(k, "elementwise-binary", g_bin_src, t, "mdiv", &kern))) return s;
        cl_float df = (cl_float)n_in;
        cl_double dd = (cl_double)n_in;
        ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), t == WF_F64 ? OCL_ARG(dd) : OCL_ARG(df)};
        return ocl_launch(k, kern, 3, args, 1, &n, NULL);
    }
    cl_int st;
    cl_mem acc = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, n * sizeof(cl_float), NULL, &st);
    if (!acc) return ocl_fail(k, st, "f32 accumulator allocation");
    cl_ulong zero = 0;
    snprintf(name, sizeof name, "f1_%s", op);
    if (!(s = oclew_kernel(k, "elementwise-binary", g_bin_src, t, name, &kern)))
        s = launch_bin(k, kern, ocl_mem(a), ocl_off(a), in[0], ocl_mem(b), ocl_off(b), in[1], acc, zero, rank, dims, n);
    snprintf(name, sizeof name, "fn_%s", op);
    for (int i = 2; i < n_in && !s; i++)
        if (!(s = oclew_kernel(k, "elementwise-binary", g_bin_src, t, name, &kern)))
            s = launch_bin(k, kern, acc, zero, ys, ocl_mem(k->in[i]), ocl_off(k->in[i]), in[i], acc, zero, rank, dims,
                           n);
    if (!s && !(s = oclew_kernel(k, "elementwise-binary", g_bin_src, t, "ffin", &kern))) {
        cl_float div = mean ? (cl_float)n_in : 1.0f;
        ocl_arg args[] = {OCL_ARG(acc), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(div)};
        s = ocl_launch(k, kern, 4, args, 1, &n, NULL);
    }
    /* the queued kernels keep the buffer alive until they finish */
    clReleaseMemObject(acc);
    return s;
}

static wf_status *k_Sum(wf__kctx *k) { return fold(k, "add", false); }
static wf_status *k_Mean(wf__kctx *k) { return fold(k, "add", true); }
static wf_status *k_Max(wf__kctx *k) { return fold(k, "max", false); }
static wf_status *k_Min(wf__kctx *k) { return fold(k, "min", false); }

/* ---- table ---------------------------------------------------------------------------------------- */

/* Every kernel here but Cast works in place (WF__K_INPLACE): work item i reads element i of input 0
 * (an input of the output's size is not broadcast) before it writes element i of the output, the
 * kernels' pointers are not restrict, and no later launch of the kernel reads input 0 again. Cast is
 * not marked: its output has another dtype except when it is a view of the input. */
#define KB_(Op, mask) {#Op, "OPENCL", mask, 0, k_##Op, NULL, WF__K_INPLACE},
#define KU_(Op, mask) {#Op, "OPENCL", mask, 0, oclew_k_##Op, NULL, WF__K_INPLACE},

const wf__kernel_def ocl_kernels_elementwise[] = {
    KB_(Add, WF__DT_NUMERIC)
    KB_(Sub, WF__DT_NUMERIC)
    KB_(Mul, WF__DT_NUMERIC)
    KB_(Div, WF__DT_NUMERIC)
    KB_(Pow, WF__DT_NUMERIC)
    KB_(Maximum, WF__DT_NUMERIC)
    KB_(Minimum, WF__DT_NUMERIC)
    KB_(Mod, WF__DT_NUMERIC)
    KB_(Equal, WF__DT_ALL)
    KB_(NotEqual, WF__DT_ALL)
    KB_(Less, WF__DT_ALL)
    KB_(LessEqual, WF__DT_ALL)
    KB_(Greater, WF__DT_ALL)
    KB_(GreaterEqual, WF__DT_ALL)
    KB_(And, WF__DT_BIT(WF_BOOL))
    KB_(Or, WF__DT_BIT(WF_BOOL))
    KB_(Xor, WF__DT_BIT(WF_BOOL))
    {"Where", "OPENCL", WF__DT_ALL, 1, k_Where, NULL, WF__K_INPLACE},
    {"Cast", "OPENCL", WF__DT_ALL, 0, oclew_k_Cast, NULL, 0},
    KB_(PRelu, WF__DT_NUMERIC)
    KB_(BitShift, WF__DT_INTS)
    KB_(BitwiseAnd, WF__DT_INTS)
    KB_(BitwiseOr, WF__DT_INTS)
    KB_(BitwiseXor, WF__DT_INTS)
    KB_(Sum, WF__DT_FLOATS)
    KB_(Mean, WF__DT_FLOATS)
    KB_(Max, WF__DT_NUMERIC)
    KB_(Min, WF__DT_NUMERIC)
    OCLEW_UNARY_OPS(KU_)
    {0},
};
