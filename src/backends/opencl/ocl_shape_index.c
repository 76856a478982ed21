/*
 * OpenCL kernels of the indexing ops (Gather, GatherND, ScatterND, GatherElements, ScatterElements,
 * OneHot, ReverseSequence), Pad, Trilu, EyeLike, CumSum/CumProd, and the ops that make tensors from
 * shapes and scalars (Range, Shape, Size, Fill, ConstantOfShape). The indexing ops check their indices
 * on the device (no read-back; a bad index fails the run through the device's error record, see ocl.h)
 * and clamp them while indexing, so memory stays in bounds: Gather, GatherND and GatherElements with
 * check_idx; ScatterND and ScatterElements with a checking kernel of their own, which also marks each
 * index's target in a bitmap (one bit per target, a scratch buffer per launch) and sets its word 0 when
 * a bit was already set. The scatter kernel reads that word: with duplicate targets it runs in index
 * order in the first work items (the last index wins, as the reference does), else one work item per
 * index. ReverseSequence checks its lengths with ocl_check_ints (the record again) and clamps them.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/opencl/ocl_shape.h"
#include "ops/kutil_shape.h"

#define SB OCL_SB

/* ---- kernel source: dtype-aware reductions (scatter with reduction, cumulative sums) ---------------- */

/* Built with -DT=<storage type> -DKIND=<K_*> (and -DUT=<unsigned type> for integers). */
enum { K_F32, K_F64, K_F16, K_BF16, K_INT, K_BOOL };

static const char *g_arith_src =
    "#ifdef HAS_FP64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
    "#define UNPACK(v, a) long a[8] = {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7}\n"
    "#define IDX(p, o, i) (is64 ? ((__global const long *)(p))[(o) + (i)] : (long)(p)[(o) + (i)])\n"
    "inline long fix(long v, long n) { if (v < 0) v += n; return v < 0 ? 0 : v >= n ? n - 1 : v; }\n"
    "inline long tuple_off(__global const int *ix, ulong io, int is64, long t, int last, const long *d,\n"
    "                      const long *s) {\n"
    "  long o = 0;\n"
    "  for (int c = 0; c < last; c++) o += fix(IDX(ix, io, t * last + c), d[c]) * s[c];\n"
    "  return o;\n"
    "}\n"
    "inline long elem_off(__global const int *ix, ulong io, int is64, long i, int rank, int ax, const long *id,\n"
    "                     const long *xs, long D) {\n"
    "  long r = i, o = 0;\n"
    "  for (int a = rank - 1; a >= 0; a--) {\n"
    "    long c = r % id[a];\n"
    "    r /= id[a];\n"
    "    o += (a == ax ? fix(IDX(ix, io, i), D) : c) * xs[a];\n"
    "  }\n"
    "  return o;\n"
    "}\n"
    /* ACC: what one combine computes in; CACC: what a scan accumulates in (double where the device has
     * it, as the CPU kernels widen to f64) */
    "#if KIND == 0\n"
    "#define ACC float\n#define LD(p, i) (p)[i]\n#define ST(p, i, v) ((p)[i] = (v))\n"
    "#elif KIND == 1\n"
    "#define ACC double\n#define LD(p, i) (p)[i]\n#define ST(p, i, v) ((p)[i] = (v))\n"
    "#elif KIND == 2\n"
    "#define ACC float\n#define LD(p, i) vload_half((i), (__global const half *)(p))\n"
    "#define ST(p, i, v) vstore_half_rte((float)(v), (i), (__global half *)(p))\n"
    "#elif KIND == 3\n"
    "#define ACC float\n#define LD(p, i) as_float((uint)(p)[i] << 16)\n"
    "inline ushort bf_round(float f) {\n"
    "  uint u = as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"
    "  return (ushort)(u >> 16);\n"
    "}\n"
    "#define ST(p, i, v) ((p)[i] = bf_round((float)(v)))\n"
    "#else\n"
    "#define ACC long\n#define LD(p, i) (long)(p)[i]\n#define ST(p, i, v) ((p)[i] = (T)(v))\n"
    "#endif\n"
    "#if KIND <= 3\n"
    "#ifdef HAS_FP64\n#define CACC double\n#else\n#define CACC float\n#endif\n"
    "#endif\n"
    /* red: 1 add, 2 mul, 3 max, 4 min; NaN wins max and min, integers wrap, bool is or / and */
    "inline ACC comb(ACC a, ACC b, int red) {\n"
    "#if KIND <= 3\n"
    "  if (red == 1) return a + b;\n"
    "  if (red == 2) return a * b;\n"
    "  if (isnan(a) || isnan(b)) return a + b;\n"
    "  return red == 3 ? (a > b ? a : b) : (a < b ? a : b);\n"
    "#elif KIND == 5\n"
    "  return (red == 1 || red == 3) ? (a | b) : (a & b);\n"
    "#else\n"
    "  if (red == 1) return (ACC)(T)((UT)a + (UT)b);\n"
    "  if (red == 2) return (ACC)(T)((UT)a * (UT)b);\n"
    "  return red == 3 ? (a > b ? a : b) : (a < b ? a : b);\n"
    "#endif\n"
    "}\n"
    "__kernel void scatternd_red(__global T *y, ulong yo, __global const T *u, ulong uo, __global const int *ix,\n"
    "                            ulong io, int is64, int last, long8 dims, long8 st, long slice, long ntup,\n"
    "                            __global const uint *dup, int red) {\n"
    "  UNPACK(dims, d); UNPACK(st, s);\n"
    "  long g = get_global_id(0);\n"
    "  int seq = *dup != 0;\n"
    "  if (seq && g >= slice) return;\n"
    "  long t0 = seq ? 0 : g / slice, t1 = seq ? ntup : t0 + 1, e = seq ? g : g % slice;\n"
    "  for (long t = t0; t < t1; t++) {\n"
    "    long o = yo + tuple_off(ix, io, is64, t, last, d, s) + e;\n"
    "    ST(y, o, comb(LD(y, o), LD(u, uo + t * slice + e), red));\n"
    "  }\n"
    "}\n"
    "__kernel void scatter_el_red(__global T *y, ulong yo, __global const T *u, ulong uo, __global const int *ix,\n"
    "                             ulong io, int is64, int rank, int ax, long8 idims, long8 yst, long D, long n,\n"
    "                             __global const uint *dup, int red) {\n"
    "  UNPACK(idims, id); UNPACK(yst, ys);\n"
    "  long g = get_global_id(0);\n"
    "  int seq = *dup != 0;\n"
    "  if (seq && g) return;\n"
    "  long i0 = seq ? 0 : g, i1 = seq ? n : g + 1;\n"
    "  for (long i = i0; i < i1; i++) {\n"
    "    long o = yo + elem_off(ix, io, is64, i, rank, ax, id, ys, D);\n"
    "    ST(y, o, comb(LD(y, o), LD(u, uo + i), red));\n"
    "  }\n"
    "}\n"
    /* one work item per (outer, inner) line walks the axis in scan order */
    "__kernel void cumsum(__global T *y, ulong yo, __global const T *x, ulong xo, long D, long inner, int excl,\n"
    "                     int rev, int prod) {\n"
    "  long g = get_global_id(0), base = (g / inner) * D * inner + g % inner;\n"
    "#if KIND <= 3\n"
    "  CACC acc = prod ? 1 : 0;\n"
    "#else\n"
    "  ulong acc = prod ? 1 : 0;\n"
    "#endif\n"
    "  for (long t = 0; t < D; t++) {\n"
    "    long p = base + (rev ? D - 1 - t : t) * inner;\n"
    "#if KIND <= 3\n"
    "    CACC v = (CACC)LD(x, xo + p);\n"
    "#elif KIND == 5\n"
    "    ulong v = x[xo + p] != 0;\n"
    "#else\n"
    "    ulong v = (ulong)(long)x[xo + p];\n"
    "#endif\n"
    "    if (excl) ST(y, yo + p, acc);\n"
    "    acc = prod ? acc * v : acc + v;\n"
    "    if (!excl) ST(y, yo + p, acc);\n"
    "  }\n"
    "}\n";

static wf_status *arith_kernel(wf__kctx *k, wf_dtype dt, const char *name, cl_kernel *out)
{
    const char *t, *ut = "ulong";
    int kind;
    switch (dt) {
    case WF_F32: kind = K_F32; t = "float"; break;
    case WF_F64: kind = K_F64; t = "double"; break;
    case WF_F16: kind = K_F16; t = "ushort"; break;
    case WF_BF16: kind = K_BF16; t = "ushort"; break;
    case WF_BOOL: kind = K_BOOL; t = "uchar"; break;
    case WF_I8: kind = K_INT; t = "char"; ut = "uchar"; break;
    case WF_U8: kind = K_INT; t = "uchar"; ut = "uchar"; break;
    case WF_I16: kind = K_INT; t = "short"; ut = "ushort"; break;
    case WF_I32: kind = K_INT; t = "int"; ut = "uint"; break;
    default: kind = K_INT; t = "long"; ut = "ulong"; break;
    }
    char opts[128];
    snprintf(opts, sizeof opts, "-DT=%s -DUT=%s -DKIND=%d%s", t, ut, kind, ocl_of(k)->fp64 ? " -DHAS_FP64" : "");
    return ocl_kernel(k, "shape_arith", g_arith_src, opts, name, out);
}

/* ---- kernel source: index checks on the device ------------------------------------------------------ */

/* Entry g of the indices, entry c = g % last of tuple g / last, must be in [-d[c], d[c]); the first bad
 * one met sets the record's site word (err[0]) from 0 to this launch's site and writes the index, the
 * tuple and the entry as longs at err[2..7]. */
static const char *g_check_src =
    "#define UNPACK(v, a) long a[8] = {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7}\n"
    "#define IDX(p, o, i) (is64 ? ((__global const long *)(p))[(o) + (i)] : (long)(p)[(o) + (i)])\n"
    "__kernel void check_idx(__global const int *ix, ulong io, int is64, int last, long8 dims, __global int *err,\n"
    "                        uint site) {\n"
    "  UNPACK(dims, d);\n"
    "  long g = get_global_id(0), v = IDX(ix, io, g);\n"
    "  int c = (int)(g % last);\n"
    "  long n = d[c];\n"
    "  if (v >= -n && v < n) return;\n"
    "  if (atomic_cmpxchg((volatile __global int *)err, 0, (int)site) == 0) {\n"
    "    __global long *e = (__global long *)err;\n"
    "    e[1] = v;\n"
    "    e[2] = g / last;\n"
    "    e[3] = c;\n"
    "  }\n"
    "}\n"
    /* the scatters' checks: a bad index goes to the record as above; a good one sets its target's bit in
     * bm[1...], and a bit already set sets bm[0] (duplicates: the scatter then runs in index order) */
    "inline void flag(__global int *err, uint site, long v, long pos, long ent) {\n"
    "  if (atomic_cmpxchg((volatile __global int *)err, 0, (int)site) == 0) {\n"
    "    __global long *e = (__global long *)err;\n"
    "    e[1] = v;\n"
    "    e[2] = pos;\n"
    "    e[3] = ent;\n"
    "  }\n"
    "}\n"
    "inline void mark(__global uint *bm, long t) {\n"
    "  uint bit = 1u << (uint)(t & 31);\n"
    "  volatile __global uint *w = (volatile __global uint *)bm;\n"
    "  if (atomic_or(w + 1 + (t >> 5), bit) & bit) atomic_or(w, 1u);\n"
    "}\n"
    /* one work item per tuple; its target is the slice it writes (slice 0: nothing to mark) */
    "__kernel void scatternd_check(__global const int *ix, ulong io, int is64, int last, long8 dims, long8 st,\n"
    "                              long slice, __global int *err, uint site, __global uint *bm) {\n"
    "  UNPACK(dims, d); UNPACK(st, s);\n"
    "  long t = get_global_id(0), o = 0;\n"
    "  for (int c = 0; c < last; c++) {\n"
    "    long v = IDX(ix, io, t * last + c), n = d[c];\n"
    "    if (v < -n || v >= n) {\n"
    "      flag(err, site, v, t, c);\n"
    "      return;\n"
    "    }\n"
    "    o += (v < 0 ? v + n : v) * s[c];\n"
    "  }\n"
    "  if (slice > 0) mark(bm, o / slice);\n"
    "}\n"
    /* one work item per index; its target is the element of y it writes */
    "__kernel void scatter_el_check(__global const int *ix, ulong io, int is64, int rank, int ax, long8 idims,\n"
    "                               long8 yst, long D, __global int *err, uint site, __global uint *bm) {\n"
    "  UNPACK(idims, id); UNPACK(yst, ys);\n"
    "  long i = get_global_id(0), v = IDX(ix, io, i);\n"
    "  if (v < -D || v >= D) {\n"
    "    flag(err, site, v, i, 0);\n"
    "    return;\n"
    "  }\n"
    "  long r = i, o = 0;\n"
    "  for (int a = rank - 1; a >= 0; a--) {\n"
    "    long c = r % id[a];\n"
    "    r /= id[a];\n"
    "    o += (a == ax ? (v < 0 ? v + D : v) : c) * ys[a];\n"
    "  }\n"
    "  mark(bm, o);\n"
    "}\n";

/* Enqueues the check of indices ix, seen as tuples of `last` entries, entry c against dims[c], for a
 * site of `kind` (axis: the gathered axis, or GatherND's batch dims) naming data x's shape. */
static wf_status *check_on_device(wf__kctx *k, const wf_tensor *ix, int last, const int64_t *dims, int kind, int axis,
                                  const wf_tensor *x)
{
    if (!ix->size) return NULL;
    char b[SB];
    cl_mem em;
    cl_uint site;
    cl_kernel kern;
    WF__TRY(ocl_kernel(k, "shape_check", g_check_src, "", "check_idx", &kern));
    WF__TRY(ocl_err_site(k, kind, axis, ocl_shp_shape(x->rank, x->dims, b), &em, &site));
    cl_mem im = ocl_mem(ix);
    cl_ulong io = ocl_off(ix);
    cl_int is64 = ix->dtype == WF_I64, l = last;
    cl_long8 ld = ocl_shp_l8(last, dims, 1);
    ocl_arg args[] = {OCL_ARG(im), OCL_ARG(io), OCL_ARG(is64), OCL_ARG(l), OCL_ARG(ld), OCL_ARG(em), OCL_ARG(site)};
    size_t g = (size_t)ix->size;
    return ocl_launch_checked(k, kern, 7, args, 1, &g);
}

/* A zeroed duplicates bitmap for `targets` target elements: word 0 is the "duplicates" flag, then one
 * bit per target. The caller releases it after enqueueing the kernels that use it (the runtime keeps it
 * alive until they finish). */
static wf_status *bitmap_new(wf__kctx *k, int64_t targets, cl_mem *out)
{
    static const cl_uint zero = 0;
    size_t bytes = sizeof(cl_uint) * (size_t)(1 + (targets + 31) / 32);
    cl_int st = CL_SUCCESS;
    *out = clCreateBuffer(ocl_of(k)->ctx, CL_MEM_READ_WRITE, bytes, NULL, &st);
    if (!*out) return ocl_fail(k, st, "scatter bitmap allocation");
    st = clEnqueueFillBuffer(ocl_of(k)->q, *out, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
    if (st == CL_SUCCESS) return NULL;
    clReleaseMemObject(*out);
    *out = NULL;
    return ocl_fail(k, st, "scatter bitmap fill");
}

/* ---- shared pieces -------------------------------------------------------------------------------- */

static wf_status *check_index_dtype(wf__kctx *k, const wf_tensor *t, const char *what)
{
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' must be i32 or i64, got %s", what,
                                   ocl_shp_dtname(t->dtype));
    return NULL;
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int reduction(wf__kctx *k)
{
    const char *rs = ocl_host->attr_get(k->op, k->attrs, "reduction")->s;
    if (!rs) return RED_NONE;
    return !strcmp(rs, "add") ? RED_ADD : !strcmp(rs, "mul") ? RED_MUL : !strcmp(rs, "max") ? RED_MAX
         : !strcmp(rs, "min") ? RED_MIN : RED_NONE;
}

/* y = copy of x on the device (the scatters start from the data). */
static wf_status *copy_whole(wf__kctx *k, wf_tensor *y, const wf_tensor *x)
{
    if (!x->bytes) return NULL;
    cl_int st = clEnqueueCopyBuffer(ocl_of(k)->q, ocl_mem(x), ocl_mem(y), x->dev_offset, y->dev_offset, x->bytes, 0,
                                    NULL, NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "buffer copy");
}

/* ---- Gather ------------------------------------------------------------------------------------- */

wf_status *ocl_shp_gather(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    char b[SB];
    WF__TRY(check_index_dtype(k, ix, "indices"));
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    int ax;
    if (!ocl_shp_axis(axis, x->rank, &ax))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", axis,
                                   ocl_shp_shape(x->rank, x->dims, b));
    int r = x->rank - 1 + ix->rank;
    if (r > WF_MAX_RANK) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output rank %d is above %d", r, WF_MAX_RANK);
    int64_t D = x->dims[ax];
    WF__TRY(check_on_device(k, ix, 1, &D, OCL_SITE_GATHER, ax, x));
    int64_t d[WF_MAX_RANK];
    int q = 0;
    for (int i = 0; i < ax; i++) d[q++] = x->dims[i];
    for (int i = 0; i < ix->rank; i++) d[q++] = ix->dims[i];
    for (int i = ax + 1; i < x->rank; i++) d[q++] = x->dims[i];
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size || D == 0) return NULL; /* an empty axis: every index is bad, and the check says so */
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(x->dtype), "gather", &kern));
    cl_mem ym = ocl_mem(y), xm = ocl_mem(x), im = ocl_mem(ix);
    cl_ulong yo = ocl_off(y), xo = ocl_off(x), io = ocl_off(ix);
    cl_int is64 = ix->dtype == WF_I64;
    cl_long n = ix->size, Dl = D, inner = ocl_shp_numel(x->rank - ax - 1, x->dims + ax + 1);
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(im),
                      OCL_ARG(io), OCL_ARG(is64), OCL_ARG(n), OCL_ARG(Dl), OCL_ARG(inner)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 10, args, 1, &g, NULL);
}

/* ---- GatherND / ScatterND ----------------------------------------------------------------------- */

typedef struct {
    int last;
    int64_t dims[8], st[8]; /* the indexed dims of data and their element strides */
    int64_t n;              /* index tuples */
    int64_t slice;          /* elements per tuple */
} nd_info;

/* Checks the shapes of indices [..., last] against data (their values against dims [bd, bd + last) of
 * data are checked on the device). */
static wf_status *nd_check(wf__kctx *k, const wf_tensor *x, const wf_tensor *ix, int bd, nd_info *nd)
{
    char b1[SB], b2[SB];
    int q = ix->rank;
    memset(nd, 0, sizeof *nd);
    if (q < 1 || x->rank < 1 || bd >= q || bd >= x->rank)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "data %s and indices %s need rank >= 1 and above batch_dims %d",
                                   ocl_shp_shape(x->rank, x->dims, b1), ocl_shp_shape(q, ix->dims, b2), bd);
    int64_t last = ix->dims[q - 1];
    if (last < 1 || last > x->rank - bd)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "the last dim of indices %s must be in [1, %d] for data %s",
                                   ocl_shp_shape(q, ix->dims, b1), x->rank - bd, ocl_shp_shape(x->rank, x->dims, b2));
    for (int i = 0; i < bd; i++)
        if (x->dims[i] != ix->dims[i])
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "batch dim %d differs between data %s and indices %s", i,
                                       ocl_shp_shape(x->rank, x->dims, b1), ocl_shp_shape(q, ix->dims, b2));
    int64_t st[WF_MAX_RANK];
    ocl_shp_strides(x->rank, x->dims, st);
    nd->last = (int)last;
    for (int c = 0; c < last; c++) {
        nd->dims[c] = x->dims[bd + c];
        nd->st[c] = st[bd + c];
    }
    nd->slice = ocl_shp_numel(x->rank - bd - (int)last, x->dims + bd + last);
    nd->n = ix->size / last;
    return NULL;
}

wf_status *ocl_shp_gathernd(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    WF__TRY(check_index_dtype(k, ix, "indices"));
    int64_t bd = ocl_host->attr_get(k->op, k->attrs, "batch_dims")->i;
    if (bd < 0 || bd >= WF_MAX_RANK)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "batch_dims %" PRId64 " is out of range", bd);
    nd_info nd;
    WF__TRY(nd_check(k, x, ix, (int)bd, &nd));
    WF__TRY(check_on_device(k, ix, nd.last, nd.dims, OCL_SITE_ND, (int)bd, x));
    bool empty_dim = false;
    for (int c = 0; c < nd.last; c++) empty_dim |= nd.dims[c] == 0;
    int q = ix->rank;
    int64_t d[WF_MAX_RANK];
    int r = 0;
    for (int i = 0; i < q - 1; i++) d[r++] = ix->dims[i];
    for (int i = (int)bd + nd.last; i < x->rank; i++) d[r++] = x->dims[i];
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size || empty_dim) return NULL; /* an empty indexed dim: the check fails every tuple */
    int64_t batches = ocl_shp_numel((int)bd, x->dims);
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(x->dtype), "gathernd", &kern));
    cl_mem ym = ocl_mem(y), xm = ocl_mem(x), im = ocl_mem(ix);
    cl_ulong yo = ocl_off(y), xo = ocl_off(x), io = ocl_off(ix);
    cl_int is64 = ix->dtype == WF_I64, last = nd.last;
    cl_long8 ld = ocl_shp_l8(nd.last, nd.dims, 1), ls = ocl_shp_l8(nd.last, nd.st, 0);
    cl_long slice = nd.slice, per_batch = batches ? nd.n / batches : 1,
            batch_elems = ocl_shp_numel(x->rank - (int)bd, x->dims + bd);
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(im), OCL_ARG(io), OCL_ARG(is64),
                      OCL_ARG(last), OCL_ARG(ld), OCL_ARG(ls), OCL_ARG(slice), OCL_ARG(per_batch), OCL_ARG(batch_elems)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 13, args, 1, &g, NULL);
}

wf_status *ocl_shp_scatternd(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1], *u = k->in[2];
    char b1[SB], b2[SB], b3[SB];
    WF__TRY(check_index_dtype(k, ix, "indices"));
    int red = reduction(k);
    if (u->dtype != x->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "updates are %s but data is %s", ocl_shp_dtname(u->dtype),
                                   ocl_shp_dtname(x->dtype));
    int q = ix->rank;
    int64_t last = q >= 1 ? ix->dims[q - 1] : -1;
    bool ok = q >= 1 && last >= 1 && last <= x->rank && u->rank == q - 1 + x->rank - last;
    for (int i = 0; ok && i < u->rank; i++)
        ok = u->dims[i] == (i < q - 1 ? ix->dims[i] : x->dims[last + i - (q - 1)]);
    if (!ok)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "updates %s do not match indices %s and data %s (want indices.shape[:-1] + "
                                   "data.shape[indices.shape[-1]:])",
                                   ocl_shp_shape(u->rank, u->dims, b1), ocl_shp_shape(q, ix->dims, b2),
                                   ocl_shp_shape(x->rank, x->dims, b3));
    nd_info nd;
    WF__TRY(nd_check(k, x, ix, 0, &nd));
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    WF__TRY(copy_whole(k, y, x));
    if (!nd.n) return NULL;
    /* the check marks each tuple's target slice; an empty output still has its indices checked (every
     * one is out of range for an empty dim) */
    bool empty_dim = false;
    for (int c = 0; c < nd.last; c++) empty_dim |= nd.dims[c] == 0;
    cl_mem em, bm = NULL;
    cl_uint site;
    cl_kernel ck, kern;
    wf_status *s = NULL;
    if ((s = ocl_kernel(k, "shape_check", g_check_src, "", "scatternd_check", &ck)) ||
        (s = ocl_err_site(k, OCL_SITE_ND, 0, ocl_shp_shape(x->rank, x->dims, b1), &em, &site)) ||
        (s = bitmap_new(k, ocl_shp_numel(nd.last, x->dims), &bm)))
        goto done;
    cl_mem ym = ocl_mem(y), um = ocl_mem(u), im = ocl_mem(ix);
    cl_ulong yo = ocl_off(y), uo = ocl_off(u), io = ocl_off(ix);
    cl_int is64 = ix->dtype == WF_I64, lst = nd.last, rd = red;
    cl_long8 ld = ocl_shp_l8(nd.last, nd.dims, 1), ls = ocl_shp_l8(nd.last, nd.st, 0);
    cl_long slice = nd.slice, ntup = nd.n;
    ocl_arg cargs[] = {OCL_ARG(im), OCL_ARG(io), OCL_ARG(is64), OCL_ARG(lst), OCL_ARG(ld),
                       OCL_ARG(ls), OCL_ARG(slice), OCL_ARG(em), OCL_ARG(site), OCL_ARG(bm)};
    size_t cg = (size_t)nd.n;
    if ((s = ocl_launch_checked(k, ck, 10, cargs, 1, &cg)) || !nd.slice || empty_dim) goto done;
    if (red == RED_NONE) s = ocl_shp_move_kernel(k, ocl_size(x->dtype), "scatternd", &kern);
    else s = arith_kernel(k, x->dtype, "scatternd_red", &kern);
    if (s) goto done;
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(um), OCL_ARG(uo), OCL_ARG(im), OCL_ARG(io), OCL_ARG(is64),
                      OCL_ARG(lst), OCL_ARG(ld), OCL_ARG(ls), OCL_ARG(slice), OCL_ARG(ntup), OCL_ARG(bm), OCL_ARG(rd)};
    size_t g = (size_t)(nd.slice * nd.n); /* with duplicates only the first nd.slice work items run */
    s = ocl_launch(k, kern, red == RED_NONE ? 13 : 14, args, 1, &g, NULL);
done:
    if (bm) clReleaseMemObject(bm); /* the queued kernels keep it alive until they finish */
    return s;
}

/* ---- GatherElements / ScatterElements ----------------------------------------------------------- */

/* Checks the shapes of indices against data on the axis and the other dims (their values are checked
 * on the device). */
static wf_status *elements_check(wf__kctx *k, const wf_tensor *x, const wf_tensor *ix, int *ax)
{
    char b0[SB], b1[SB];
    WF__TRY(check_index_dtype(k, ix, "indices"));
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!ocl_shp_axis(axis, x->rank, ax))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", axis,
                                   ocl_shp_shape(x->rank, x->dims, b0));
    if (ix->rank != x->rank)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s must have the rank of data %s",
                                   ocl_shp_shape(ix->rank, ix->dims, b1), ocl_shp_shape(x->rank, x->dims, b0));
    for (int d = 0; d < x->rank; d++)
        if (d != *ax && ix->dims[d] > x->dims[d])
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s is larger than data %s in dim %d",
                                       ocl_shp_shape(ix->rank, ix->dims, b1), ocl_shp_shape(x->rank, x->dims, b0), d);
    return NULL;
}

wf_status *ocl_shp_gather_elements(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1];
    int ax;
    WF__TRY(elements_check(k, x, ix, &ax));
    int64_t D0 = x->dims[ax];
    WF__TRY(check_on_device(k, ix, 1, &D0, OCL_SITE_ELEMENTS, ax, x));
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, ix->rank, ix->dims, &y));
    if (!y->size || D0 == 0) return NULL; /* an empty axis: every index is bad, and the check says so */
    int64_t xst[WF_MAX_RANK];
    ocl_shp_strides(x->rank, x->dims, xst);
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(x->dtype), "gather_el", &kern));
    cl_mem ym = ocl_mem(y), xm = ocl_mem(x), im = ocl_mem(ix);
    cl_ulong yo = ocl_off(y), xo = ocl_off(x), io = ocl_off(ix);
    cl_int is64 = ix->dtype == WF_I64, rank = x->rank, a = ax;
    cl_long8 lid = ocl_shp_l8(ix->rank, ix->dims, 1), lxs = ocl_shp_l8(x->rank, xst, 0);
    cl_long D = x->dims[ax];
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(im), OCL_ARG(io),
                      OCL_ARG(is64), OCL_ARG(rank), OCL_ARG(a), OCL_ARG(lid), OCL_ARG(lxs), OCL_ARG(D)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 12, args, 1, &g, NULL);
}

wf_status *ocl_shp_scatter_elements(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *ix = k->in[1], *u = k->in[2];
    char b1[SB], b2[SB];
    int ax;
    if (u->rank != ix->rank || memcmp(u->dims, ix->dims, sizeof(int64_t) * (size_t)ix->rank))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "updates %s must have the shape of indices %s",
                                   ocl_shp_shape(u->rank, u->dims, b2), ocl_shp_shape(ix->rank, ix->dims, b1));
    WF__TRY(elements_check(k, x, ix, &ax));
    int red = reduction(k);
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    WF__TRY(copy_whole(k, y, x));
    if (!ix->size) return NULL;
    /* the check marks each index's target element (an empty axis: every index is bad, and it says so) */
    int64_t yst[WF_MAX_RANK];
    ocl_shp_strides(x->rank, x->dims, yst);
    cl_mem em, bm = NULL;
    cl_uint site;
    cl_kernel ck, kern;
    wf_status *s = NULL;
    if ((s = ocl_kernel(k, "shape_check", g_check_src, "", "scatter_el_check", &ck)) ||
        (s = ocl_err_site(k, OCL_SITE_ELEMENTS, ax, ocl_shp_shape(x->rank, x->dims, b1), &em, &site)) ||
        (s = bitmap_new(k, x->size, &bm)))
        goto done;
    cl_mem ym = ocl_mem(y), um = ocl_mem(u), im = ocl_mem(ix);
    cl_ulong yo = ocl_off(y), uo = ocl_off(u), io = ocl_off(ix);
    cl_int is64 = ix->dtype == WF_I64, rank = x->rank, a = ax, rd = red;
    cl_long8 lid = ocl_shp_l8(ix->rank, ix->dims, 1), lys = ocl_shp_l8(x->rank, yst, 0);
    cl_long D = x->dims[ax], n = ix->size;
    ocl_arg cargs[] = {OCL_ARG(im),  OCL_ARG(io), OCL_ARG(is64), OCL_ARG(rank), OCL_ARG(a),
                       OCL_ARG(lid), OCL_ARG(lys), OCL_ARG(D),   OCL_ARG(em),   OCL_ARG(site), OCL_ARG(bm)};
    size_t g = (size_t)ix->size; /* with duplicates only work item 0 runs */
    if ((s = ocl_launch_checked(k, ck, 11, cargs, 1, &g)) || D == 0) goto done;
    if (red == RED_NONE) s = ocl_shp_move_kernel(k, ocl_size(x->dtype), "scatter_el", &kern);
    else s = arith_kernel(k, x->dtype, "scatter_el_red", &kern);
    if (s) goto done;
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(um), OCL_ARG(uo), OCL_ARG(im), OCL_ARG(io), OCL_ARG(is64),
                      OCL_ARG(rank), OCL_ARG(a), OCL_ARG(lid), OCL_ARG(lys), OCL_ARG(D), OCL_ARG(n), OCL_ARG(bm),
                      OCL_ARG(rd)};
    s = ocl_launch(k, kern, red == RED_NONE ? 14 : 15, args, 1, &g, NULL);
done:
    if (bm) clReleaseMemObject(bm); /* the queued kernels keep it alive until they finish */
    return s;
}

/* ---- Pad ---------------------------------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

wf_status *ocl_shp_pad(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[SB], b2[SB];
    const char *ms = ocl_host->attr_get(k->op, k->attrs, "mode")->s;
    if (!ms) ms = "constant";
    int mode = !strcmp(ms, "reflect") ? PAD_REFLECT : !strcmp(ms, "edge") ? PAD_EDGE : !strcmp(ms, "wrap") ? PAD_WRAP
             : PAD_CONSTANT;
    int r = x->rank;
    int64_t p[2 * WF_MAX_RANK], ax[WF_MAX_RANK];
    int np_, na;
    WF__TRY(ocl_shp_ints(k, 1, "pads", p, 2 * WF_MAX_RANK, &np_));
    if (ocl_shp_has(k, 3)) {
        WF__TRY(ocl_shp_ints(k, 3, "axes", ax, WF_MAX_RANK, &na));
    } else {
        na = r;
        for (int i = 0; i < r; i++) ax[i] = i;
    }
    if (np_ != 2 * na)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "pads has %d values; data %s with %d padded axes needs %d",
                                   np_, ocl_shp_shape(r, x->dims, b1), na, 2 * na);
    cl_ulong pat = 0;
    size_t eb = ocl_size(x->dtype);
    if (ocl_shp_has(k, 2) && mode == PAD_CONSTANT) {
        const wf_tensor *cv = k->in[2];
        if (cv->dtype != x->dtype || cv->size > 1)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "constant_value %s%s must be a scalar of data's dtype %s",
                                       ocl_shp_dtname(cv->dtype), ocl_shp_shape(cv->rank, cv->dims, b1),
                                       ocl_shp_dtname(x->dtype));
        unsigned char raw[8] = {0};
        WF__TRY(ocl_shp_read(k, cv, raw));
        memcpy(&pat, raw, eb); /* little-endian: the element's bytes are the low bytes of pat */
    }
    int64_t st[WF_MAX_RANK], d[WF_MAX_RANK], pb[WF_MAX_RANK];
    ocl_shp_strides(r, x->dims, st);
    int bad = 0;
    switch (wf__ku_pad_plan(r, x->dims, na, ax, p, mode == PAD_CONSTANT, d, pb, &bad)) {
    case 1:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range or repeated for data %s",
                                   ax[bad], ocl_shp_shape(r, x->dims, b1));
    case 2:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "pads %s crop axis %d of data %s below zero",
                                   ocl_shp_shape(np_ <= WF_MAX_RANK ? np_ : WF_MAX_RANK, p, b1), bad,
                                   ocl_shp_shape(r, x->dims, b2));
    case 3:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "mode '%s' cannot pad the empty axis %d of data %s", ms, bad,
                                   ocl_shp_shape(r, x->dims, b1));
    case 4:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "padding axis %d of data %s overflows int64", bad,
                                   ocl_shp_shape(r, x->dims, b1));
    default: break;
    }
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size) return NULL;
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, eb, "pad", &kern));
    cl_mem ym = ocl_mem(y), xm = ocl_mem(x);
    cl_ulong yo = ocl_off(y), xo = ocl_off(x);
    cl_int rank = r, md = mode;
    cl_long8 lod = ocl_shp_l8(r, d, 1), lid = ocl_shp_l8(r, x->dims, 1), lpb = ocl_shp_l8(r, pb, 0),
             lst = ocl_shp_l8(r, st, 0);
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(rank), OCL_ARG(md),
                      OCL_ARG(lod), OCL_ARG(lid), OCL_ARG(lpb), OCL_ARG(lst), OCL_ARG(pat)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 11, args, 1, &g, NULL);
}

/* ---- OneHot ------------------------------------------------------------------------------------- */

wf_status *ocl_shp_onehot(wf__kctx *k)
{
    const wf_tensor *ix = k->in[0], *dp = k->in[1], *vals = k->in[2];
    char b[SB];
    if (!(WF__DT_BIT(ix->dtype) & WF__DT_NUMERIC) || !(WF__DT_BIT(dp->dtype) & WF__DT_NUMERIC) || dp->size != 1 ||
        vals->size != 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "needs numeric indices, a numeric depth with one value and two values, got %s, %s and %s",
                                   ocl_shp_dtname(ix->dtype), ocl_shp_dtname(dp->dtype),
                                   ocl_shp_shape(vals->rank, vals->dims, b));
    unsigned char raw[8] = {0};
    WF__TRY(ocl_shp_read(k, dp, raw));
    double depth_f = ocl_shp_load_f64(raw, dp->dtype, 0);
    if (!(depth_f >= 1) || depth_f > 1e15)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "depth must be positive, got %g", depth_f);
    int64_t depth = (int64_t)depth_f;
    int r = ix->rank + 1;
    if (r > WF_MAX_RANK) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output rank %d is above %d", r, WF_MAX_RANK);
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    int ax;
    if (!ocl_shp_axis(axis, r, &ax))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for indices %s", axis,
                                   ocl_shp_shape(ix->rank, ix->dims, b));
    int64_t d[WF_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) d[i] = i == ax ? depth : ix->dims[j++];
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, vals->dtype, r, d, &y));
    if (!y->size) return NULL;
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(vals->dtype), "onehot", &kern));
    cl_mem ym = ocl_mem(y), vm = ocl_mem(vals), im = ocl_mem(ix);
    cl_ulong yo = ocl_off(y), vo = ocl_off(vals), ib = ix->dev_offset;
    cl_int code = ix->dtype;
    cl_long dl = depth, inner = ocl_shp_numel(ix->rank - ax, ix->dims + ax);
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(vm), OCL_ARG(vo), OCL_ARG(im),
                      OCL_ARG(ib), OCL_ARG(code), OCL_ARG(dl), OCL_ARG(inner)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 9, args, 1, &g, NULL);
}

/* ---- Range, Shape, Size: small outputs computed on the host and written ------------------------- */

wf_status *ocl_shp_range(wf__kctx *k)
{
    wf_dtype dt = k->in[0]->dtype;
    for (int i = 0; i < 3; i++)
        if (k->in[i]->dtype != dt || k->in[i]->size != 1)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "start, limit and delta must be scalars of one dtype");
    unsigned char raw[3][8] = {{0}};
    for (int i = 0; i < 3; i++) WF__TRY(ocl_shp_read(k, k->in[i], raw[i]));
    bool is_int = !(WF__DT_BIT(dt) & WF__DT_FLOATS);
    int64_t n;
    double s = 0, dl = 0;
    int64_t si = 0, dli = 0;
    if (is_int) {
        si = ocl_shp_load_i64(raw[0], dt, 0);
        int64_t l = ocl_shp_load_i64(raw[1], dt, 0);
        dli = ocl_shp_load_i64(raw[2], dt, 0);
        if (dli == 0) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "delta is 0");
        if (!wf__ku_range_count_i64(si, l, dli, &n))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                       "range(%" PRId64 ", %" PRId64 ", %" PRId64 ") has more elements than int64 holds",
                                       si, l, dli);
    } else {
        s = ocl_shp_load_f64(raw[0], dt, 0);
        double l = ocl_shp_load_f64(raw[1], dt, 0);
        dl = ocl_shp_load_f64(raw[2], dt, 0);
        if (dl == 0) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "delta is 0");
        if (!wf__ku_range_count_f64(s, l, dl, &n))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "range(%g, %g, %g) is too long", s, l, dl);
    }
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, dt, 1, &n, &y));
    if (!n) return NULL;
    void *buf = ocl_host->malloc(y->bytes);
    if (!buf) return ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %" PRId64 " values", n);
    for (int64_t i = 0; i < n; i++) {
        if (is_int) {
            int64_t v = (int64_t)((uint64_t)si + (uint64_t)i * (uint64_t)dli);
            switch (dt) {
            case WF_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
            case WF_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
            case WF_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
            case WF_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
            default: ((int64_t *)buf)[i] = v;
            }
        } else {
            ocl_shp_store_f64(buf, dt, i, s + (double)i * dl);
        }
    }
    wf_status *st = ocl_shp_write(k, y, buf, y->bytes);
    ocl_host->free(buf);
    return st;
}

wf_status *ocl_shp_shape_op(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t start = ocl_host->attr_get(k->op, k->attrs, "start")->i, end = ocl_host->attr_get(k->op, k->attrs, "end")->i,
            r = x->rank;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    int64_t n = end - start;
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, WF_I64, 1, &n, &y));
    return ocl_shp_write(k, y, x->dims + start, sizeof(int64_t) * (size_t)n);
}

wf_status *ocl_shp_size(wf__kctx *k)
{
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, WF_I64, 0, NULL, &y));
    int64_t n = k->in[0]->size;
    return ocl_shp_write(k, y, &n, sizeof n);
}

/* ---- Fill, ConstantOfShape, EyeLike: patterns written on the device ---------------------------- */

static wf_status *fill_from_dims(wf__kctx *k, wf_dtype dt, const void *pattern)
{
    char b[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(ocl_shp_ints(k, 0, "shape", v, WF_MAX_RANK, &n));
    for (int i = 0; i < n; i++)
        if (v[i] < 0)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has a negative dim", ocl_shp_shape(n, v, b));
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, dt, n, v, &y));
    return ocl_shp_fill(k, y, pattern, ocl_size(dt));
}

wf_status *ocl_shp_fill_op(wf__kctx *k)
{
    const wf_tensor *v = k->in[1];
    if (v->size != 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "value must hold one element, got %" PRId64, v->size);
    unsigned char raw[8] = {0};
    WF__TRY(ocl_shp_read(k, v, raw));
    return fill_from_dims(k, v->dtype, raw);
}

wf_status *ocl_shp_constant_of_shape(wf__kctx *k)
{
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, "value");
    static const unsigned char zero[8] = {0};
    if (a->set && a->t) {
        if (a->t->size != 1)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "attribute 'value' must hold one element");
        unsigned char raw[8] = {0};
        WF__TRY(ocl_shp_read(k, a->t, raw));
        return fill_from_dims(k, a->t->dtype, raw);
    }
    return fill_from_dims(k, WF_F32, zero);
}

wf_status *ocl_shp_eyelike(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    if (x->rank != 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be 2-D", ocl_shp_shape(x->rank, x->dims, b));
    const wf__attr *dta = ocl_host->attr_get(k->op, k->attrs, "dtype");
    wf_dtype dt = dta->set ? (wf_dtype)dta->i : x->dtype;
    int64_t kk = ocl_host->attr_get(k->op, k->attrs, "k")->i;
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, dt, 2, x->dims, &y));
    if (!y->size) return NULL;
    cl_ulong one = 0;
    ocl_shp_store_f64(&one, dt, 0, 1.0);
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(dt), "eyelike", &kern));
    cl_mem ym = ocl_mem(y);
    cl_ulong yo = ocl_off(y);
    cl_long C = x->dims[1], kl = kk;
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(C), OCL_ARG(kl), OCL_ARG(one)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 5, args, 1, &g, NULL);
}

/* ---- Trilu, CumSum, ReverseSequence ------------------------------------------------------------- */

static wf_status *scalar_int(wf__kctx *k, int idx, const char *what, int64_t *v)
{
    const wf_tensor *t = k->in[idx];
    char b[SB];
    if ((t->dtype != WF_I32 && t->dtype != WF_I64) || t->rank > 1 || t->size != 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s must be one i32 or i64 value", what,
                                   ocl_shp_dtname(t->dtype), ocl_shp_shape(t->rank, t->dims, b));
    unsigned char raw[8] = {0};
    WF__TRY(ocl_shp_read(k, t, raw));
    *v = ocl_shp_load_i64(raw, t->dtype, 0);
    return NULL;
}

wf_status *ocl_shp_trilu(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    if (x->rank < 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 2",
                                   ocl_shp_shape(x->rank, x->dims, b));
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1], kk = 0;
    if (ocl_shp_has(k, 1)) WF__TRY(scalar_int(k, 1, "k", &kk));
    /* clamp so row + k cannot overflow; beyond +-(R + C) the answer no longer changes */
    int64_t lim = R + C + 1;
    kk = kk > lim ? lim : kk < -lim ? -lim : kk;
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    if (!y->size) return NULL;
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(x->dtype), "trilu", &kern));
    cl_mem ym = ocl_mem(y), xm = ocl_mem(x);
    cl_ulong yo = ocl_off(y), xo = ocl_off(x);
    cl_long Rl = R, Cl = C, kl = kk;
    cl_int upper = ocl_host->attr_get(k->op, k->attrs, "upper")->i != 0;
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(Rl), OCL_ARG(Cl), OCL_ARG(kl),
                      OCL_ARG(upper)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 8, args, 1, &g, NULL);
}

wf_status *ocl_shp_cumsum(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t axis;
    int a;
    WF__TRY(scalar_int(k, 1, "axis", &axis));
    if (!ocl_shp_axis(axis, x->rank, &a))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                                   ocl_shp_shape(x->rank, x->dims, b));
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    if (!y->size) return NULL;
    cl_kernel kern;
    WF__TRY(arith_kernel(k, x->dtype, "cumsum", &kern));
    cl_mem ym = ocl_mem(y), xm = ocl_mem(x);
    cl_ulong yo = ocl_off(y), xo = ocl_off(x);
    cl_long D = x->dims[a], inner = ocl_shp_numel(x->rank - a - 1, x->dims + a + 1);
    cl_int excl = ocl_host->attr_get(k->op, k->attrs, "exclusive")->i != 0,
           rev = ocl_host->attr_get(k->op, k->attrs, "reverse")->i != 0, prod = !strcmp(k->op->name, "CumProd");
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(D),
                      OCL_ARG(inner), OCL_ARG(excl), OCL_ARG(rev), OCL_ARG(prod)};
    size_t g = (size_t)(y->size / D);
    return ocl_launch(k, kern, 9, args, 1, &g, NULL);
}

wf_status *ocl_shp_reverse_sequence(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *l = k->in[1];
    char b0[SB], b1[SB];
    int ba = (int)ocl_host->attr_get(k->op, k->attrs, "batch_axis")->i,
        ta = (int)ocl_host->attr_get(k->op, k->attrs, "time_axis")->i;
    WF__TRY(check_index_dtype(k, l, "sequence_lens"));
    if (x->rank < 2 || l->rank != 1 || (ba != 0 && ba != 1) || ta != 1 - ba || l->dims[0] != x->dims[ba])
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "sequence_lens %s must hold one length per batch of input %s",
                                   ocl_shp_shape(l->rank, l->dims, b1), ocl_shp_shape(x->rank, x->dims, b0));
    int64_t B = x->dims[ba], T = x->dims[ta];
    /* a length outside [0, T] fails the run through the error record; the kernel clamps it */
    WF__TRY(ocl_check_ints(k, l, OCL_SITE_SEQLEN, 0, T, false, NULL, T, ocl_shp_shape(x->rank, x->dims, b0)));
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y));
    if (!y->size) return NULL;
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(x->dtype), "revseq", &kern));
    cl_mem ym = ocl_mem(y), xm = ocl_mem(x), lm = ocl_mem(l);
    cl_ulong yo = ocl_off(y), xo = ocl_off(x), lo = ocl_off(l);
    cl_int is64 = l->dtype == WF_I64, bax = ba;
    cl_long Bl = B, Tl = T, blk = ocl_shp_numel(x->rank - 2, x->dims + 2);
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(lm), OCL_ARG(lo),
                      OCL_ARG(is64), OCL_ARG(bax), OCL_ARG(Bl), OCL_ARG(Tl), OCL_ARG(blk)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 11, args, 1, &g, NULL);
}
