/*
 * OpenCL kernels of the shape family: views (Identity, Reshape, Flatten, Squeeze, Unsqueeze) and the
 * copies built on one strided-copy kernel (Transpose, Concat, Split, Slice, Tile, Expand, DepthToSpace,
 * SpaceToDepth), the helpers the ocl_shape_*.c files share, and the family's kernel table.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/opencl/ocl_elementwise.h"
#include "backends/opencl/ocl_shape.h"
#include "ops/kutil_shape.h"

#define SB OCL_SB

/* ---- kernel source: elements move as opaque T of 1, 2, 4 or 8 bytes ------------------------------ */

static const char *g_move_src =
    "#ifdef HAS_FP64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n"
    "#define UNPACK(v, a) long a[8] = {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7}\n"
    "#define IDX(p, o, i) (is64 ? ((__global const long *)(p))[(o) + (i)] : (long)(p)[(o) + (i)])\n"
    "inline long fix(long v, long n) { if (v < 0) v += n; return v < 0 ? 0 : v >= n ? n - 1 : v; }\n"
    /* the element offset of index tuple t (of `last` entries) over dims d with strides s */
    "inline long tuple_off(__global const int *ix, ulong io, int is64, long t, int last, const long *d,\n"
    "                      const long *s) {\n"
    "  long o = 0;\n"
    "  for (int c = 0; c < last; c++) o += fix(IDX(ix, io, t * last + c), d[c]) * s[c];\n"
    "  return o;\n"
    "}\n"
    /* the element offset in data of element i of indices, its axis coordinate replaced by the index */
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
    "__kernel void copy_nd(__global T *y, ulong yo, __global const T *x, ulong xo, int rank, long8 dims,\n"
    "                      long8 xst, long8 xmod, long8 yst) {\n"
    "  UNPACK(dims, d); UNPACK(xst, xs); UNPACK(xmod, xm); UNPACK(yst, ys);\n"
    "  long r = get_global_id(0), so = 0, dso = 0;\n"
    "  for (int a = rank - 1; a >= 0; a--) {\n"
    "    long c = r % d[a];\n"
    "    r /= d[a];\n"
    "    so += (c % xm[a]) * xs[a];\n"
    "    dso += c * ys[a];\n"
    "  }\n"
    "  y[yo + dso] = x[xo + so];\n"
    "}\n"
    "__kernel void gather(__global T *y, ulong yo, __global const T *x, ulong xo, __global const int *ix,\n"
    "                     ulong io, int is64, long n, long D, long inner) {\n"
    "  long u = get_global_id(0), e = u % inner, t = u / inner;\n"
    "  long v = fix(IDX(ix, io, t % n), D);\n"
    "  y[yo + u] = x[xo + ((t / n) * D + v) * inner + e];\n"
    "}\n"
    "__kernel void gathernd(__global T *y, ulong yo, __global const T *x, ulong xo, __global const int *ix,\n"
    "                       ulong io, int is64, int last, long8 dims, long8 st, long slice, long per_batch,\n"
    "                       long batch_elems) {\n"
    "  UNPACK(dims, d); UNPACK(st, s);\n"
    "  long u = get_global_id(0), e = u % slice, t = u / slice;\n"
    "  y[yo + u] = x[xo + (t / per_batch) * batch_elems + tuple_off(ix, io, is64, t, last, d, s) + e];\n"
    "}\n"
    /* launched over (tuple, element); *dup (set by scatternd_check when two tuples hit one slice): the
     * first `slice` work items each walk every tuple in order (the last one wins, as the reference
     * does), the others do nothing; else one work item per (tuple, element) */
    "__kernel void scatternd(__global T *y, ulong yo, __global const T *u, ulong uo, __global const int *ix,\n"
    "                        ulong io, int is64, int last, long8 dims, long8 st, long slice, long ntup,\n"
    "                        __global const uint *dup) {\n"
    "  UNPACK(dims, d); UNPACK(st, s);\n"
    "  long g = get_global_id(0);\n"
    "  if (*dup) {\n"
    "    if (g >= slice) return;\n"
    "    for (long t = 0; t < ntup; t++)\n"
    "      y[yo + tuple_off(ix, io, is64, t, last, d, s) + g] = u[uo + t * slice + g];\n"
    "  } else {\n"
    "    long t = g / slice, e = g % slice;\n"
    "    y[yo + tuple_off(ix, io, is64, t, last, d, s) + e] = u[uo + g];\n"
    "  }\n"
    "}\n"
    "__kernel void gather_el(__global T *y, ulong yo, __global const T *x, ulong xo, __global const int *ix,\n"
    "                        ulong io, int is64, int rank, int ax, long8 idims, long8 xst, long D) {\n"
    "  UNPACK(idims, id); UNPACK(xst, xs);\n"
    "  long i = get_global_id(0);\n"
    "  y[yo + i] = x[xo + elem_off(ix, io, is64, i, rank, ax, id, xs, D)];\n"
    "}\n"
    /* launched over the indices; *dup (set by scatter_el_check when two indices hit one element): work
     * item 0 walks every index in order, the others do nothing */
    "__kernel void scatter_el(__global T *y, ulong yo, __global const T *u, ulong uo, __global const int *ix,\n"
    "                         ulong io, int is64, int rank, int ax, long8 idims, long8 yst, long D, long n,\n"
    "                         __global const uint *dup) {\n"
    "  UNPACK(idims, id); UNPACK(yst, ys);\n"
    "  long g = get_global_id(0);\n"
    "  if (*dup) {\n"
    "    if (g) return;\n"
    "    for (long i = 0; i < n; i++) y[yo + elem_off(ix, io, is64, i, rank, ax, id, ys, D)] = u[uo + i];\n"
    "  } else {\n"
    "    y[yo + elem_off(ix, io, is64, g, rank, ax, id, ys, D)] = u[uo + g];\n"
    "  }\n"
    "}\n"
    /* mode 0 constant, 1 reflect, 2 edge, 3 wrap; -1: the padding value */
    "inline long pad_map(long i, long n, int mode) {\n"
    "  if (i >= 0 && i < n) return i;\n"
    "  if (mode == 2) return i < 0 ? 0 : n - 1;\n"
    "  if (mode == 3) return ((i % n) + n) % n;\n"
    "  if (mode == 1) {\n"
    "    if (n == 1) return 0;\n"
    "    long p = 2 * (n - 1), m = ((i % p) + p) % p;\n"
    "    return m >= n ? p - m : m;\n"
    "  }\n"
    "  return -1;\n"
    "}\n"
    "__kernel void pad(__global T *y, ulong yo, __global const T *x, ulong xo, int rank, int mode, long8 od,\n"
    "                  long8 idm, long8 pb, long8 ist, ulong pat) {\n"
    "  UNPACK(od, o); UNPACK(idm, id); UNPACK(pb, b); UNPACK(ist, is);\n"
    "  long i = get_global_id(0), r = i, so = 0;\n"
    "  int outside = 0;\n"
    "  for (int a = rank - 1; a >= 0; a--) {\n"
    "    long c = r % o[a];\n"
    "    r /= o[a];\n"
    "    long m = pad_map(c - b[a], id[a], mode);\n"
    "    if (m < 0) outside = 1; else so += m * is[a];\n"
    "  }\n"
    "  y[yo + i] = outside ? (T)pat : x[xo + so];\n"
    "}\n"
    /* indices of any numeric dtype (code = wf_dtype), read at byte offset ib; floats truncate */
    "inline long load_any(__global const uchar *p, ulong ib, int code, long e) {\n"
    "  p += ib;\n"
    "  switch (code) {\n"
    "  case 1: return (long)((__global const float *)p)[e];\n"
    "#ifdef HAS_FP64\n"
    "  case 2: return (long)((__global const double *)p)[e];\n"
    "#endif\n"
    "  case 3: return (long)vload_half(e, (__global const half *)p);\n"
    "  case 4: return (long)as_float((uint)((__global const ushort *)p)[e] << 16);\n"
    "  case 5: return ((__global const char *)p)[e];\n"
    "  case 6: return p[e];\n"
    "  case 7: return ((__global const short *)p)[e];\n"
    "  case 8: return ((__global const int *)p)[e];\n"
    "  default: return ((__global const long *)p)[e];\n"
    "  }\n"
    "}\n"
    "__kernel void onehot(__global T *y, ulong yo, __global const T *vals, ulong vo, __global const uchar *ix,\n"
    "                     ulong ib, int code, long depth, long inner) {\n"
    "  long i = get_global_id(0), in = i % inner, t = i / inner, v = t % depth;\n"
    "  long q = load_any(ix, ib, code, (t / depth) * inner + in);\n"
    "  if (q < 0) q += depth;\n"
    "  y[yo + i] = q == v ? vals[vo + 1] : vals[vo];\n"
    "}\n"
    "__kernel void eyelike(__global T *y, ulong yo, long C, long k, ulong one) {\n"
    "  long i = get_global_id(0);\n"
    "  y[yo + i] = (i % C) == (i / C) + k ? (T)one : (T)0;\n"
    "}\n"
    "__kernel void trilu(__global T *y, ulong yo, __global const T *x, ulong xo, long R, long C, long k,\n"
    "                    int upper) {\n"
    "  long i = get_global_id(0), c = i % C, r = (i / C) % R;\n"
    "  int keep = upper ? c >= r + k : c <= r + k;\n"
    "  y[yo + i] = keep ? x[xo + i] : (T)0;\n"
    "}\n"
    "__kernel void revseq(__global T *y, ulong yo, __global const T *x, ulong xo, __global const int *ix,\n"
    "                     ulong io, int is64, int ba, long B, long TT, long blk) {\n"
    "  long i = get_global_id(0), e = i % blk, r = i / blk;\n"
    "  long b = ba == 0 ? r / TT : r % B, t = ba == 0 ? r % TT : r / B;\n"
    "  long len = IDX(ix, io, b);\n"
    "  len = len < 0 ? 0 : len > TT ? TT : len;\n"
    "  long s = t < len ? len - 1 - t : t;\n"
    "  long src = ba == 0 ? b * TT + s : s * B + b;\n"
    "  y[yo + i] = x[xo + src * blk + e];\n"
    "}\n";

wf_status *ocl_shp_move_kernel(wf__kctx *k, size_t eb, const char *name, cl_kernel *out)
{
    const char *t = eb == 1 ? "uchar" : eb == 2 ? "ushort" : eb == 4 ? "uint" : "ulong";
    char opts[96];
    snprintf(opts, sizeof opts, "-DT=%s%s", t, ocl_of(k)->fp64 ? " -DHAS_FP64" : "");
    return ocl_kernel(k, "shape_move", g_move_src, opts, name, out);
}

/* ---- host helpers ----------------------------------------------------------------------------------- */

const char *ocl_shp_dtname(wf_dtype t)
{
    static const char *names[] = {"invalid", "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "i64", "bool"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "invalid";
}

const char *ocl_shp_shape(int rank, const int64_t *dims, char *buf)
{
    size_t off = 0;
    buf[off++] = '[';
    for (int i = 0; i < rank && off < 140; i++)
        off += (size_t)snprintf(buf + off, SB - off, "%s%lld", i ? "," : "", (long long)dims[i]);
    buf[off++] = ']';
    buf[off] = 0;
    return buf;
}

bool ocl_shp_axis(int64_t axis, int rank, int *out)
{
    return wf__ku_norm_axis(axis, rank, out);
}

int64_t ocl_shp_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

void ocl_shp_strides(int rank, const int64_t *dims, int64_t *st)
{
    wf__ku_strides(rank, dims, st);
}

cl_long8 ocl_shp_l8(int n, const int64_t *v, int64_t fill)
{
    cl_long8 r;
    for (int i = 0; i < 8; i++) r.s[i] = i < n ? (cl_long)v[i] : (cl_long)fill;
    return r;
}

wf_status *ocl_shp_read(wf__kctx *k, const wf_tensor *t, void *dst)
{
    if (!t->bytes) return NULL;
    if (t->data) {
        memcpy(dst, t->data, t->bytes);
        return NULL;
    }
    if (ocl_of(k)->no_readback)
        return ocl_host->kctx_fail(k, WF_FAILED_PRECONDITION, "reads %zu bytes of an input back from %s "
                                   "(WEFT_OCL_NO_READBACK is set)", t->bytes, k->device->short_name);
    cl_int st = clEnqueueReadBuffer(ocl_of(k)->q, ocl_mem(t), CL_TRUE, t->dev_offset, t->bytes, dst, 0, NULL, NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "read of a small input");
}

wf_status *ocl_shp_write(wf__kctx *k, wf_tensor *t, const void *src, size_t n)
{
    if (!n) return NULL;
    cl_int st = clEnqueueWriteBuffer(ocl_of(k)->q, ocl_mem(t), CL_TRUE, t->dev_offset, n, src, 0, NULL, NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "write of a small output");
}

wf_status *ocl_shp_fill(wf__kctx *k, wf_tensor *t, const void *pattern, size_t eb)
{
    if (!t->bytes) return NULL;
    cl_int st = clEnqueueFillBuffer(ocl_of(k)->q, ocl_mem(t), pattern, eb, t->dev_offset, t->bytes, 0, NULL, NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "buffer fill");
}

static uint16_t f2h(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u, h = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The elementwise family's host loaders read every dtype the same way. */
double ocl_shp_load_f64(const void *p, wf_dtype t, int64_t i) { return oclew_load_f64(p, t, i); }

int64_t ocl_shp_load_i64(const void *p, wf_dtype t, int64_t i) { return oclew_load_i64(p, t, i); }

void ocl_shp_store_f64(void *p, wf_dtype t, int64_t i, double v)
{
    switch (t) {
    case WF_F32: ((float *)p)[i] = (float)v; break;
    case WF_F64: ((double *)p)[i] = v; break;
    case WF_F16: ((uint16_t *)p)[i] = f2h((float)v); break;
    case WF_BF16: ((uint16_t *)p)[i] = f2bf((float)v); break;
    case WF_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: {
        int64_t x = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
        switch (t) {
        case WF_I8: ((int8_t *)p)[i] = (int8_t)x; break;
        case WF_U8: ((uint8_t *)p)[i] = (uint8_t)x; break;
        case WF_I16: ((int16_t *)p)[i] = (int16_t)x; break;
        case WF_I32: ((int32_t *)p)[i] = (int32_t)x; break;
        case WF_I64: ((int64_t *)p)[i] = x; break;
        default: break;
        }
    }
    }
}

wf_status *ocl_shp_ints(wf__kctx *k, int idx, const char *what, int64_t *v, int max, int *n)
{
    const wf_tensor *t = k->in[idx];
    char b[SB];
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' must be i32 or i64, got %s", what,
                                   ocl_shp_dtname(t->dtype));
    if (t->rank > 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' must be 1-D, got shape %s", what,
                                   ocl_shp_shape(t->rank, t->dims, b));
    if (t->size > max)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' has %" PRId64 " values, at most %d allowed", what,
                                   t->size, max);
    int64_t raw[2 * WF_MAX_RANK + 2];
    WF__TRY(ocl_shp_read(k, t, raw));
    for (int64_t i = 0; i < t->size; i++) v[i] = ocl_shp_load_i64(raw, t->dtype, i);
    *n = (int)t->size;
    return NULL;
}

wf_status *ocl_shp_index_host(wf__kctx *k, const wf_tensor *ix, int64_t limit, int64_t **v)
{
    *v = NULL;
    if (ix->size > limit) return NULL;
    int64_t *buf = ocl_host->malloc(sizeof(int64_t) * (size_t)(ix->size > 0 ? ix->size : 1));
    if (!buf) return ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory reading %" PRId64 " indices", ix->size);
    wf_status *s = ocl_shp_read(k, ix, buf);
    if (s) {
        ocl_host->free(buf);
        return s;
    }
    /* widen in place from the back, so i32 values never overwrite ones not yet read */
    if (ix->dtype == WF_I32)
        for (int64_t i = ix->size - 1; i >= 0; i--) buf[i] = ((const int32_t *)buf)[i];
    *v = buf;
    return NULL;
}

/* ---- the strided copy ------------------------------------------------------------------------------- */

wf_status *ocl_shp_copy_nd(wf__kctx *k, const wf_tensor *y, int64_t yo, const wf_tensor *x, int64_t xo, int rank,
                           const int64_t *dims, const int64_t *xst, const int64_t *xmod, const int64_t *yst)
{
    /* Drop size-1 axes and merge axes that are contiguous with each other on both sides (and do not
     * wrap), so the kernel's index arithmetic runs over as few dims as possible. */
    int64_t d[8], xs[8], xm[8], ys[8];
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0) return NULL;
        if (dims[i] == 1) continue;
        bool wrap = xmod && xmod[i] != dims[i];
        if (r > 0 && !wrap && xm[r - 1] == d[r - 1] && xs[r - 1] == xst[i] * dims[i] && ys[r - 1] == yst[i] * dims[i]) {
            d[r - 1] *= dims[i];
            xm[r - 1] = d[r - 1];
            xs[r - 1] = xst[i];
            ys[r - 1] = yst[i];
            continue;
        }
        d[r] = dims[i];
        xs[r] = xst[i];
        ys[r] = yst[i];
        xm[r] = xmod ? xmod[i] : dims[i];
        r++;
    }
    if (r == 0) {
        d[0] = xm[0] = 1;
        xs[0] = ys[0] = 0;
        r = 1;
    }
    if (r > 8) return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "a strided copy over %d dims (at most 8)", r);
    cl_kernel kern;
    WF__TRY(ocl_shp_move_kernel(k, ocl_size(x->dtype), "copy_nd", &kern));
    cl_mem ym = ocl_mem(y), xmm = ocl_mem(x);
    cl_ulong yoff = ocl_off(y) + (cl_ulong)yo, xoff = ocl_off(x) + (cl_ulong)xo;
    cl_int rk = r;
    cl_long8 ld = ocl_shp_l8(r, d, 1), lxs = ocl_shp_l8(r, xs, 0), lxm = ocl_shp_l8(r, xm, 1), lys = ocl_shp_l8(r, ys, 0);
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yoff), OCL_ARG(xmm), OCL_ARG(xoff), OCL_ARG(rk),
                      OCL_ARG(ld), OCL_ARG(lxs), OCL_ARG(lxm), OCL_ARG(lys)};
    size_t g = (size_t)ocl_shp_numel(r, d);
    return ocl_launch(k, kern, 9, args, 1, &g, NULL);
}

/* A contiguous source copied into a contiguous destination of the same shape. */
static wf_status *copy_contig(wf__kctx *k, const wf_tensor *y, const wf_tensor *x, int rank, const int64_t *dims,
                              const int64_t *xst)
{
    int64_t yst[WF_MAX_RANK];
    ocl_shp_strides(rank, dims, yst);
    return ocl_shp_copy_nd(k, y, 0, x, 0, rank, dims, xst, NULL, yst);
}

/* ---- views -------------------------------------------------------------------------------------- */

static wf_status *k_identity(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    return ocl_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
}

static wf_status *k_reshape(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[SB], b2[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(ocl_shp_ints(k, 1, "shape", v, WF_MAX_RANK, &n));
    bool allowzero = ocl_host->attr_get(k->op, k->attrs, "allowzero")->i != 0;
    int64_t d[WF_MAX_RANK], prod;
    int bad = 0;
    switch (wf__ku_reshape_dims(x->rank, x->dims, x->size, n, v, allowzero, d, &prod, &bad)) {
    case WF__KU_RESHAPE_TWO_NEG:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has more than one -1", ocl_shp_shape(n, v, b1));
    case WF__KU_RESHAPE_NEG_DIM:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has a negative dim", ocl_shp_shape(n, v, b1));
    case WF__KU_RESHAPE_COPY_OOR:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s copies dim %d from input %s of rank %d", ocl_shp_shape(n, v, b1),
                 bad, ocl_shp_shape(x->rank, x->dims, b2), x->rank);
    case WF__KU_RESHAPE_ZERO_NEG:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s has both 0 and -1 with allowzero=1", ocl_shp_shape(n, v, b1));
    case WF__KU_RESHAPE_INFER:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reshape %s (%" PRId64 " elements) to shape %s",
                 ocl_shp_shape(x->rank, x->dims, b1), x->size, ocl_shp_shape(n, v, b2));
    case WF__KU_RESHAPE_COUNT:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reshape %s (%" PRId64 " elements) to shape %s (%" PRId64 " elements)",
                 ocl_shp_shape(x->rank, x->dims, b1), x->size, ocl_shp_shape(n, d, b2), prod);
    default: break;
    }
    return ocl_host->kctx_output_view(k, 0, 0, n, d);
}

static wf_status *k_flatten(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    if (axis < -x->rank || axis > x->rank)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for rank %d", axis, x->rank);
    int a = (int)(axis < 0 ? axis + x->rank : axis);
    int64_t d[2] = {ocl_shp_numel(a, x->dims), ocl_shp_numel(x->rank - a, x->dims + a)};
    return ocl_host->kctx_output_view(k, 0, 0, 2, d);
}

static wf_status *k_squeeze(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB], b2[SB];
    int64_t v[WF_MAX_RANK], d[WF_MAX_RANK];
    int n = 0, r, bad = 0;
    bool has = ocl_shp_has(k, 1);
    if (has) WF__TRY(ocl_shp_ints(k, 1, "axes", v, WF_MAX_RANK, &n));
    switch (wf__ku_squeeze_dims(x->rank, x->dims, n, has ? v : NULL, d, &r, &bad)) {
    case 1:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axes %s are invalid for input %s", ocl_shp_shape(n, v, b),
                 ocl_shp_shape(x->rank, x->dims, b2));
    case 2:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot squeeze axis %d of input %s: its size is not 1", bad,
                 ocl_shp_shape(x->rank, x->dims, b));
    default: break;
    }
    return ocl_host->kctx_output_view(k, 0, 0, r, d);
}

static wf_status *k_unsqueeze(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(ocl_shp_ints(k, 1, "axes", v, WF_MAX_RANK, &n));
    int r = x->rank + n;
    if (r > WF_MAX_RANK)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "unsqueezing rank %d by %d axes exceeds rank %d", x->rank, n,
                                   WF_MAX_RANK);
    int64_t d[WF_MAX_RANK];
    if (wf__ku_unsqueeze_dims(x->rank, x->dims, n, v, d) >= 0)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axes %s are invalid for an output of rank %d",
                                   ocl_shp_shape(n, v, b), r);
    return ocl_host->kctx_output_view(k, 0, 0, r, d);
}

/* ---- Transpose, Concat, Split, Slice ------------------------------------------------------------ */

static wf_status *k_transpose(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    const wf__attr *pa = ocl_host->attr_get(k->op, k->attrs, "perm");
    int r = x->rank, perm[WF_MAX_RANK];
    switch (wf__ku_perm(pa->n, pa->ints, r, perm)) {
    case 1: return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "perm has %d entries for an input of rank %d", pa->n, r);
    case 2: return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "perm is not a permutation of 0..%d", r - 1);
    default: break;
    }
    int64_t in_st[WF_MAX_RANK], d[WF_MAX_RANK], st[WF_MAX_RANK];
    ocl_shp_strides(r, x->dims, in_st);
    for (int i = 0; i < r; i++) {
        d[i] = x->dims[perm[i]];
        st[i] = in_st[perm[i]];
    }
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, r, d, &y));
    return copy_contig(k, y, x, r, d, st);
}

static wf_status *k_concat(wf__kctx *k)
{
    const wf_tensor *x0 = k->in[0];
    char b1[SB], b2[SB];
    int r = x0->rank, ax;
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!ocl_shp_axis(axis, r, &ax))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for inputs of rank %d",
                                   axis, r);
    int64_t d[WF_MAX_RANK];
    memcpy(d, x0->dims, sizeof(int64_t) * (size_t)r);
    d[ax] = 0;
    for (int i = 0; i < k->n_in; i++) {
        const wf_tensor *t = k->in[i];
        bool ok = t->rank == r && t->dtype == x0->dtype;
        for (int a = 0; ok && a < r; a++) ok = a == ax || t->dims[a] == x0->dims[a];
        if (!ok)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %d %s%s does not match input 0 %s%s off axis %d", i,
                                       ocl_shp_dtname(t->dtype), ocl_shp_shape(t->rank, t->dims, b1),
                                       ocl_shp_dtname(x0->dtype), ocl_shp_shape(r, x0->dims, b2), ax);
        if (wf__add_overflow_i64(d[ax], t->dims[ax], &d[ax]))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "the sizes of axis %d sum past int64 at input %d %s", ax,
                                       i, ocl_shp_shape(t->rank, t->dims, b1));
    }
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x0->dtype, r, d, &y));
    int64_t yst[WF_MAX_RANK], at = 0;
    ocl_shp_strides(r, d, yst);
    for (int i = 0; i < k->n_in; i++) {
        const wf_tensor *t = k->in[i];
        int64_t xst[WF_MAX_RANK];
        ocl_shp_strides(r, t->dims, xst);
        if (t->size) WF__TRY(ocl_shp_copy_nd(k, y, at * yst[ax], t, 0, r, t->dims, xst, NULL, yst));
        at += t->dims[ax];
    }
    return NULL;
}

static wf_status *k_split(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int ax, n = k->n_out;
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!ocl_shp_axis(axis, x->rank, &ax))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                                   ocl_shp_shape(x->rank, x->dims, b));
    int64_t *sizes = ocl_host->malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!sizes) return ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %d outputs", n);
    wf_status *s = NULL;
    int64_t dim = x->dims[ax];
    if (ocl_shp_has(k, 1)) {
        const wf_tensor *sp = k->in[1];
        if (sp->dtype != WF_I32 && sp->dtype != WF_I64) {
            s = ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'split' must be i32 or i64, got %s",
                                    ocl_shp_dtname(sp->dtype));
            goto done;
        }
        int64_t *v = NULL;
        if ((s = ocl_shp_index_host(k, sp, INT64_MAX, &v))) goto done;
        int m = (int)sp->size;
        int64_t sum = 0;
        bool neg = false;
        for (int i = 0; v && i < m; i++) {
            neg = neg || v[i] < 0;
            sum += v[i];
            if (i < n) sizes[i] = v[i];
        }
        ocl_host->free(v);
        if (m != n || neg || sum != dim) {
            s = ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                    "split sizes (%d values) must be %d non-negative sizes summing to %" PRId64
                                    ", axis %d of input %s",
                                    m, n, dim, ax, ocl_shp_shape(x->rank, x->dims, b));
            goto done;
        }
    } else {
        if (!wf__ku_split_even(dim, n, sizes)) {
            s = ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot split axis %d of input %s into %d outputs", ax,
                                    ocl_shp_shape(x->rank, x->dims, b), n);
            goto done;
        }
    }
    int64_t xst[WF_MAX_RANK], at = 0;
    ocl_shp_strides(x->rank, x->dims, xst);
    for (int i = 0; i < n && !s; i++) {
        int64_t d[WF_MAX_RANK], yst[WF_MAX_RANK];
        memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
        d[ax] = sizes[i];
        wf_tensor *y;
        if ((s = ocl_host->kctx_output(k, i, x->dtype, x->rank, d, &y))) break;
        ocl_shp_strides(x->rank, d, yst);
        if (y->size) s = ocl_shp_copy_nd(k, y, 0, x, at * xst[ax], x->rank, d, xst, NULL, yst);
        at += sizes[i];
    }
done:
    ocl_host->free(sizes);
    return s;
}

static wf_status *k_slice(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int r = x->rank;
    int64_t st[WF_MAX_RANK], en[WF_MAX_RANK], ax[WF_MAX_RANK], sp[WF_MAX_RANK];
    int ns, ne;
    WF__TRY(ocl_shp_ints(k, 1, "starts", st, WF_MAX_RANK, &ns));
    WF__TRY(ocl_shp_ints(k, 2, "ends", en, WF_MAX_RANK, &ne));
    int na = 0, nsp = 0;
    if (ocl_shp_has(k, 3)) WF__TRY(ocl_shp_ints(k, 3, "axes", ax, WF_MAX_RANK, &na));
    if (ocl_shp_has(k, 4)) WF__TRY(ocl_shp_ints(k, 4, "steps", sp, WF_MAX_RANK, &nsp));
    if (!wf__ku_slice_defaults(ns, ne, ocl_shp_has(k, 3), ax, &na, ocl_shp_has(k, 4), sp, &nsp))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "starts, ends, axes and steps have %d, %d, %d and %d values",
                                   ns, ne, na, nsp);
    int64_t d[WF_MAX_RANK], so[WF_MAX_RANK], off;
    int bad = 0;
    ocl_shp_strides(r, x->dims, so);
    switch (wf__ku_slice_plan(r, x->dims, ns, st, en, ax, sp, d, so, &off, &bad)) {
    case 1:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range or repeated for input %s", ax[bad],
                 ocl_shp_shape(r, x->dims, b));
    case 2: return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "step %d is 0", bad);
    default: break;
    }
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size) return NULL;
    int64_t yst[WF_MAX_RANK];
    ocl_shp_strides(r, d, yst);
    return ocl_shp_copy_nd(k, y, 0, x, off, r, d, so, NULL, yst);
}

/* ---- Tile, Expand, DepthToSpace / SpaceToDepth ------------------------------------------------------ */

static wf_status *k_tile(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    int64_t rep[WF_MAX_RANK];
    int n, r = x->rank;
    WF__TRY(ocl_shp_ints(k, 1, "repeats", rep, WF_MAX_RANK, &n));
    if (n != r)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "repeats has %d values but data %s has rank %d", n,
                                   ocl_shp_shape(r, x->dims, b), r);
    int64_t in_st[WF_MAX_RANK], d[WF_MAX_RANK], yst[WF_MAX_RANK];
    ocl_shp_strides(r, x->dims, in_st);
    int bad = 0;
    switch (wf__ku_tile_dims(r, x->dims, rep, d, &bad)) {
    case 1:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "repeats %s has a negative value", ocl_shp_shape(n, rep, b));
    case 2:
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "output dim %d (%" PRId64 " x %" PRId64 ") overflows int64: repeats %s", bad,
                                   x->dims[bad], rep[bad], ocl_shp_shape(n, rep, b));
    default: break;
    }
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size) return NULL;
    ocl_shp_strides(r, d, yst);
    /* output coordinate c reads source coordinate c % dim */
    return ocl_shp_copy_nd(k, y, 0, x, 0, r, d, in_st, x->dims, yst);
}

static wf_status *k_expand(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[SB], b2[SB];
    int64_t v[WF_MAX_RANK];
    int n;
    WF__TRY(ocl_shp_ints(k, 1, "shape", v, WF_MAX_RANK, &n));
    int64_t d[WF_MAX_RANK], st[WF_MAX_RANK], in_st[WF_MAX_RANK];
    ocl_shp_strides(x->rank, x->dims, in_st);
    bool same;
    int r = wf__ku_expand_dims(x->rank, x->dims, in_st, n, v, d, st, &same);
    if (r < 0)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot broadcast input %s to shape %s",
                                   ocl_shp_shape(x->rank, x->dims, b1), ocl_shp_shape(n, v, b2));
    if (same) return ocl_host->kctx_output_view(k, 0, 0, r, d);
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, r, d, &y));
    if (!y->size) return NULL;
    return copy_contig(k, y, x, r, d, st);
}

static wf_status *k_d2s(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB];
    bool d2s = !strcmp(k->op->name, "DepthToSpace");
    int64_t bs = ocl_host->attr_get(k->op, k->attrs, "blocksize")->i;
    if (x->rank != 4)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be 4-D", ocl_shp_shape(x->rank, x->dims, b));
    const wf__attr *ma = ocl_host->attr_get(k->op, k->attrs, "mode");
    bool dcr = !ma->s || !strcmp(ma->s, "DCR");
    int64_t od[6], st[6], yd[4];
    if (!wf__ku_d2s_plan(d2s, dcr, bs, x->dims, od, st, yd))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s does not divide into blocks of %" PRId64,
                                   ocl_shp_shape(4, x->dims, b), bs);
    wf_tensor *y;
    WF__TRY(ocl_host->kctx_output(k, 0, x->dtype, 4, yd, &y));
    if (!y->size) return NULL;
    return copy_contig(k, y, x, 6, od, st);
}

/* ---- the table ---------------------------------------------------------------------------------- */

const wf__kernel_def ocl_kernels_shape[] = {
    {"Identity", "OPENCL", WF__DT_ALL, 0, k_identity, NULL, 0},
    {"PlaceholderWithDefault", "OPENCL", WF__DT_ALL, 0, k_identity, NULL, 0}, /* its default, when not fed */
    {"Reshape", "OPENCL", WF__DT_ALL, 0, k_reshape, NULL, 0},
    {"Flatten", "OPENCL", WF__DT_ALL, 0, k_flatten, NULL, 0},
    {"Squeeze", "OPENCL", WF__DT_ALL, 0, k_squeeze, NULL, 0},
    {"Unsqueeze", "OPENCL", WF__DT_ALL, 0, k_unsqueeze, NULL, 0},
    {"Transpose", "OPENCL", WF__DT_ALL, 0, k_transpose, NULL, 0},
    {"Concat", "OPENCL", WF__DT_ALL, 0, k_concat, NULL, 0},
    {"Split", "OPENCL", WF__DT_ALL, 0, k_split, NULL, 0},
    {"Slice", "OPENCL", WF__DT_ALL, 0, k_slice, NULL, 0},
    {"Tile", "OPENCL", WF__DT_ALL, 0, k_tile, NULL, 0},
    {"Expand", "OPENCL", WF__DT_ALL, 0, k_expand, NULL, 0},
    {"DepthToSpace", "OPENCL", WF__DT_ALL, 0, k_d2s, NULL, 0},
    {"SpaceToDepth", "OPENCL", WF__DT_ALL, 0, k_d2s, NULL, 0},
    {"Gather", "OPENCL", WF__DT_ALL, 0, ocl_shp_gather, NULL, 0},
    {"GatherND", "OPENCL", WF__DT_ALL, 0, ocl_shp_gathernd, NULL, 0},
    {"ScatterND", "OPENCL", WF__DT_ALL, 0, ocl_shp_scatternd, NULL, 0},
    {"GatherElements", "OPENCL", WF__DT_ALL, 0, ocl_shp_gather_elements, NULL, 0},
    {"ScatterElements", "OPENCL", WF__DT_ALL, 0, ocl_shp_scatter_elements, NULL, 0},
    {"Pad", "OPENCL", WF__DT_ALL, 0, ocl_shp_pad, NULL, 0},
    {"OneHot", "OPENCL", WF__DT_ALL, 2, ocl_shp_onehot, NULL, 0},
    {"Range", "OPENCL", WF__DT_NUMERIC, 0, ocl_shp_range, NULL, 0},
    {"Shape", "OPENCL", WF__DT_ALL, 0, ocl_shp_shape_op, NULL, 0},
    {"Size", "OPENCL", WF__DT_ALL, 0, ocl_shp_size, NULL, 0},
    {"Fill", "OPENCL", WF__DT_ALL, 1, ocl_shp_fill_op, NULL, 0},
    {"ConstantOfShape", "OPENCL", WF__DT_ALL, -1, ocl_shp_constant_of_shape, NULL, 0},
    {"Trilu", "OPENCL", WF__DT_ALL, 0, ocl_shp_trilu, NULL, 0},
    {"EyeLike", "OPENCL", WF__DT_ALL, -1, ocl_shp_eyelike, NULL, 0},
    {"CumSum", "OPENCL", WF__DT_NUMERIC, 0, ocl_shp_cumsum, NULL, 0},
    {"CumProd", "OPENCL", WF__DT_NUMERIC, 0, ocl_shp_cumsum, NULL, 0},
    {"ReverseSequence", "OPENCL", WF__DT_ALL, 0, ocl_shp_reverse_sequence, NULL, 0},
    {NULL, NULL, 0, 0, NULL, NULL, 0},
};
