/*
 * OpenCL kernels of Einsum and the ops whose output size depends on the data (NonZero, Compress, Unique,
 * NonMaxSuppression), plus the seq family's kernel table (the recurrent ops and Attention are in
 * ocl_rnn_attn.c). Semantics follow src/backends/cpu/k_misc*.c and k_signal_misc.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/opencl/ocl_seq.h"
#include "ops/kutil_einsum.h"
#include "ops/kutil_select.h"
#include "ops/kutil_shape.h"

/* ---- kernel source (one program per dtype: -DDT=<wf_dtype>) ----------------------------------------- */

static const char *g_seq_src =
    OCLEW_PRELUDE
    "#ifdef HAS_FP64\n#define ACC double\n#else\n#define ACC float\n#endif\n"
    /* f16 is moved as its bits: half values cannot be dereferenced without cl_khr_fp16 */
    "#if DT == 3\n"
    "#define CPY(y, i, x, j) (((__global ushort *)(y))[i] = ((__global const ushort *)(x))[j])\n"
    "#else\n"
    "#define CPY(y, i, x, j) ((y)[i] = (x)[j])\n"
    "#endif\n"
    "typedef struct { long d[8]; } dims_t;\n"
    /* Einsum: the plan holds out rank, summed labels, operands; then out dims, each operand's stride per
     * out dim, summed dims, each operand's stride per summed label, operand offsets and which of a, b, c
     * holds each operand (more than three are packed into a). */
    "#define EOP(i) (sel[i] == 0 ? LD(a, off[i]) : sel[i] == 1 ? LD(b, off[i]) : LD(c, off[i]))\n"
    "__kernel void k_einsum(__global const ST *a, __global const ST *b, __global const ST *c,\n"
    "                       __global const long *pl, __global ST *y, ulong yo) {\n"
    "  ulong o = get_global_id(0);\n"
    "  int orank = (int)pl[0], ns = (int)pl[1], n = (int)pl[2];\n"
    "  __global const long *od = pl + 3, *ost = od + orank, *sd = ost + n * orank, *sst = sd + ns;\n"
    "  __global const long *off0 = sst + n * ns, *sel = off0 + n;\n"
    "  long off[16], idx[64];\n"
    "  for (int i = 0; i < n; i++) off[i] = off0[i];\n"
    "  ulong r = o;\n"
    "  for (int d = orank - 1; d >= 0; d--) {\n"
    "    long cc = (long)(r % (ulong)od[d]);\n"
    "    r /= (ulong)od[d];\n"
    "    for (int i = 0; i < n; i++) off[i] += cc * ost[i * orank + d];\n"
    "  }\n"
    "  bool empty = false;\n"
    "  for (int s = 0; s < ns; s++) { idx[s] = 0; if (sd[s] == 0) empty = true; }\n"
    "#ifdef IS_FLT\n"
    "  ACC acc = 0;\n"
    "#else\n"
    "  ulong acc = 0;\n"
    "#endif\n"
    "  while (!empty) {\n"
    "#ifdef IS_FLT\n"
    "    ACC p = 1;\n"
    "    for (int i = 0; i < n; i++) p *= (ACC)EOP(i);\n"
    "#else\n"
    "    ulong p = 1;\n"
    "    for (int i = 0; i < n; i++) p *= (ulong)(long)EOP(i);\n"
    "#endif\n"
    "    acc += p;\n"
    "    int s = ns - 1;\n"
    "    for (; s >= 0; s--) {\n"
    "      for (int i = 0; i < n; i++) off[i] += sst[i * ns + s];\n"
    "      if (++idx[s] < sd[s]) break;\n"
    "      for (int i = 0; i < n; i++) off[i] -= sst[i * ns + s] * sd[s];\n"
    "      idx[s] = 0;\n"
    "    }\n"
    "    if (s < 0) break;\n"
    "  }\n"
    "#ifdef IS_FLT\n"
    "  STO(y, yo + o, (CT)acc);\n"
    "#else\n"
    "  y[yo + o] = (ST)(long)acc;\n"
    "#endif\n"
    "}\n"
    /* NonZero: per-chunk counts, then each chunk writes its coordinates from its start */
    "__kernel void k_nz_count(__global const ST *x, ulong xo, ulong n, ulong ch, __global long *cnt) {\n"
    "  ulong g = get_global_id(0), b = g * ch, e = min(b + ch, n);\n"
    "  long c = 0;\n"
    "  for (ulong i = b; i < e; i++) c += LD(x, xo + i) != 0;\n"
    "  cnt[g] = c;\n"
    "}\n"
    "__kernel void k_nz_fill(__global const ST *x, ulong xo, ulong n, ulong ch, __global const long *start,\n"
    "                        __global long *y, ulong yo, long nnz, int rank, dims_t dims) {\n"
    "  ulong g = get_global_id(0), b = g * ch, e = min(b + ch, n);\n"
    "  long q = start[g];\n"
    "  for (ulong i = b; i < e; i++) {\n"
    "    if (LD(x, xo + i) == 0) continue;\n"
    "    ulong r = i;\n"
    "    for (int d = rank - 1; d >= 0; d--) {\n"
    "      y[yo + d * nnz + q] = (long)(r % (ulong)dims.d[d]);\n"
    "      r /= (ulong)dims.d[d];\n"
    "    }\n"
    "    q++;\n"
    "  }\n"
    "}\n"
    /* Compress: a gather of the selected entries along the axis */
    "__kernel void k_compress(__global const ST *x, ulong xo, __global const long *sel, __global ST *y, ulong yo,\n"
    "                         long D, long nnz, long inner) {\n"
    "  ulong i = get_global_id(0);\n"
    "  long r = (long)(i % (ulong)inner), q = (long)((i / (ulong)inner) % (ulong)nnz);\n"
    "  long o = (long)(i / (ulong)(inner * nnz));\n"
    "  CPY(y, yo + i, x, xo + (o * D + sel[q]) * inner + r);\n"
    "}\n"
    /* Unique: slices compared lexicographically, NaN last and equal to NaN (numpy.unique) */
    "#define UQ_OFF(s, j, dim) (((j) / inner * (dim) + (s)) * inner + (j) % inner)\n"
    "int uq_cmp(__global const ST *x, ulong xo, long a, long b, long len, long inner, long dim) {\n"
    "  for (long j = 0; j < len; j++) {\n"
    "    CT va = LD(x, xo + UQ_OFF(a, j, dim)), vb = LD(x, xo + UQ_OFF(b, j, dim));\n"
    "#ifdef IS_FLT\n"
    "    bool na = isnan(va), nb = isnan(vb);\n"
    "    if (na || nb) { if (na != nb) return na ? 1 : -1; continue; }\n"
    "#endif\n"
    "    if (va != vb) return va < vb ? -1 : 1;\n"
    "  }\n"
    "  return 0;\n"
    "}\n"
    /* each slice: its group's first occurrence and size */
    "__kernel void k_uq_group(__global const ST *x, ulong xo, long n, long len, long inner,\n"
    "                         __global long *first, __global long *cnt) {\n"
    "  long i = get_global_id(0), f = i, c = 0;\n"
    "  for (long j = 0; j < n; j++)\n"
    "    if (uq_cmp(x, xo, j, i, len, inner, n) == 0) { c++; if (j < f) f = j; }\n"
    "  first[i] = f;\n"
    "  cnt[i] = c;\n"
    "}\n"
    /* each slice: its group's place in the output, sorted or in order of first occurrence */
    "__kernel void k_uq_rank(__global const ST *x, ulong xo, long n, long len, long inner, int sorted,\n"
    "                        __global const long *first, __global long *rank) {\n"
    "  long i = get_global_id(0), f = first[i], r = 0;\n"
    "  for (long j = 0; j < n; j++)\n"
    "    if (first[j] == j && (sorted ? uq_cmp(x, xo, j, i, len, inner, n) < 0 : j < f)) r++;\n"
    "  rank[i] = r;\n"
    "}\n"
    "__kernel void k_uq_count(__global const long *first, long n, __global long *ng) {\n"
    "  long c = 0;\n"
    "  for (long j = 0; j < n; j++) c += first[j] == j;\n"
    "  ng[0] = c;\n"
    "}\n"
    "__kernel void k_uq_fill(__global const ST *x, ulong xo, long n, long len, long inner, long ng,\n"
    "                        __global const long *first, __global const long *cnt, __global const long *rank,\n"
    "                        __global ST *y, ulong yo, __global long *ix, ulong ixo, __global long *inv, ulong invo,\n"
    "                        __global long *cts, ulong ctso) {\n"
    "  long i = get_global_id(0), r = rank[i];\n"
    "  inv[invo + i] = r;\n"
    "  if (first[i] != i) return;\n"
    "  ix[ixo + r] = i;\n"
    "  cts[ctso + r] = cnt[i];\n"
    "  for (long j = 0; j < len; j++) CPY(y, yo + UQ_OFF(r, j, ng), x, xo + UQ_OFF(i, j, n));\n"
    "}\n"
    "#ifdef IS_FLT\n"
    /* NonMaxSuppression. Candidates of (batch, class) in score order (ties: lower box first). */
    "__kernel void k_nms_order(__global const ST *sc, ulong so, long S, int use_thr, ACC thr, __global long *order) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long bc = (long)(g / (ulong)S), i = (long)(g % (ulong)S);\n"
    "  __global const ST *s = sc + so + bc * S;\n"
    "  ACC si = LD(s, i);\n"
    "  if (use_thr && !(si > thr)) return;\n"
    "  long r = 0;\n"
    "  for (long j = 0; j < S; j++) {\n"
    "    ACC sj = LD(s, j);\n"
    "    if ((use_thr && !(sj > thr)) || j == i) continue;\n"
    "    if (sj > si || (sj == si && j < i)) r++;\n"
    "  }\n"
    "  order[bc * S + r] = i;\n"
    "}\n"
    "void nms_box(__global const ST *b, int center, ACC *x0, ACC *x1, ACC *y0, ACC *y1) {\n"
    "  ACC v0 = LD(b, 0), v1 = LD(b, 1), v2 = LD(b, 2), v3 = LD(b, 3);\n"
    "  if (center) { *x0 = v0 - v2 / 2; *x1 = v0 + v2 / 2; *y0 = v1 - v3 / 2; *y1 = v1 + v3 / 2; }\n"
    "  else { *x0 = fmin(v1, v3); *x1 = fmax(v1, v3); *y0 = fmin(v0, v2); *y1 = fmax(v0, v2); }\n"
    "}\n"
    "bool nms_suppress(__global const ST *b1, __global const ST *b2, int center, ACC thr) {\n"
    "  ACC ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;\n"
    "  nms_box(b1, center, &ax0, &ax1, &ay0, &ay1);\n"
    "  nms_box(b2, center, &bx0, &bx1, &by0, &by1);\n"
    "  ACC ix = fmin(ax1, bx1) - fmax(ax0, bx0), iy = fmin(ay1, by1) - fmax(ay0, by0);\n"
    "  if (ix <= 0 || iy <= 0) return false;\n"
    "  ACC inter = ix * iy, a1 = (ax1 - ax0) * (ay1 - ay0), a2 = (bx1 - bx0) * (by1 - by0), uni = a1 + a2 - inter;\n"
    "  if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;\n"
    "  return inter / uni > thr;\n"
    "}\n"
    /* the greedy pass of one (batch, class): sequential by nature, parallel over the pairs */
    "__kernel void k_nms_greedy(__global const ST *bx, ulong bo, __global const ST *sc, ulong so, long S, long C,\n"
    "                           int use_thr, ACC thr, ACC iou, int center, long max_out,\n"
    "                           __global const long *order, __global long *sel, __global long *nsel) {\n"
    "  long bc = get_global_id(0), b = bc / C, n = 0, k = 0;\n"
    "  __global const ST *s = sc + so + bc * S, *boxes = bx + bo + b * S * 4;\n"
    "  for (long j = 0; j < S; j++) n += !use_thr || (ACC)LD(s, j) > thr;\n"
    "  for (long r = 0; r < n && k < max_out; r++) {\n"
    "    long i = order[bc * S + r];\n"
    "    bool keep = true;\n"
    "    for (long j = 0; j < k && keep; j++) keep = !nms_suppress(boxes + i * 4, boxes + sel[bc * S + j] * 4, center, iou);\n"
    "    if (keep) sel[bc * S + k++] = i;\n"
    "  }\n"
    "  nsel[bc] = k;\n"
    "}\n"
    "__kernel void k_nms_out(__global const long *sel, __global const long *nsel, __global const long *start, long S,\n"
    "                        long C, __global long *y, ulong yo) {\n"
    "  long bc = get_global_id(0), q0 = start[bc];\n"
    "  for (long q = 0; q < nsel[bc]; q++) {\n"
    "    __global long *o = y + yo + (q0 + q) * 3;\n"
    "    o[0] = bc / C; o[1] = bc % C; o[2] = sel[bc * S + q];\n"
    "  }\n"
    "}\n"
    "#endif\n";

/* ---- helpers ------------------------------------------------------------------------------------------ */

wf_status *oclseq_buf(wf__kctx *k, size_t bytes, const void *src, cl_mem *out)
{
    cl_int st;
    *out = clCreateBuffer(ocl_of(k)->ctx, CL_MEM_READ_WRITE | (src ? CL_MEM_COPY_HOST_PTR : 0), bytes ? bytes : 1,
                          (void *)src, &st);
    if (!*out) return ocl_fail(k, st, "scratch buffer allocation");
    return NULL;
}

static wf_status *seq_kernel(wf__kctx *k, wf_dtype t, const char *name, cl_kernel *out)
{
    return oclew_kernel(k, "seq", g_seq_src, t, name, out);
}

static wf_status *read_i64(wf__kctx *k, cl_mem m, size_t n, int64_t *out)
{
    if (!n) return NULL;
    cl_int st = clEnqueueReadBuffer(ocl_of(k)->q, m, CL_TRUE, 0, n * sizeof(int64_t), out, 0, NULL, NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "read-back of counts");
}

static void release(cl_mem *m, int n)
{
    for (int i = 0; i < n; i++)
        if (m[i]) clReleaseMemObject(m[i]);
}

static wf_status *oom(wf__kctx *k, size_t bytes)
{
    return ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu host bytes", bytes);
}

/* ---- Einsum ------------------------------------------------------------------------------------------- */

static wf_status *k_Einsum(wf__kctx *k)
{
    int n = k->n_in;
    const wf__attr *eqa = ocl_host->attr_get(k->op, k->attrs, "equation");
    const char *eq = eqa && eqa->s ? eqa->s : "";
    wf_dtype t = k->in[0]->dtype;
    for (int i = 0; i < n; i++)
        if (k->in[i]->dtype != t)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %d is %s but input 0 is %s", i,
                                       oclew_dtype_name(k->in[i]->dtype), oclew_dtype_name(t));
    wf__einsum *e = ocl_host->malloc(sizeof *e);
    if (!e) return oom(k, sizeof *e);
    char err[256];
    if (!wf__einsum_parse_tensors(eq, n, k->in, e, err, sizeof err)) {
        ocl_host->free(e);
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "equation '%s': %s", eq, err);
    }
    int64_t st[WF__EINSUM_MAX_IN][WF__EINSUM_LABELS];
    int sum_label[WF__EINSUM_LABELS], ns = wf__einsum_walk(e, n, k->in, st, sum_label);
    int orank = e->out_rank;
    int64_t yd[WF_MAX_RANK], ny = 1;
    for (int d = 0; d < orank; d++) ny *= yd[d] = e->label_dim[e->out_label[d]];
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, t, orank, yd, &y);
    if (s || ny == 0) {
        ocl_host->free(e);
        return s;
    }
    size_t np = wf__einsum_plan_len(e, n, ns) + 2 * (size_t)n; /* then the operands' offsets and slots */
    int64_t *pl = ocl_host->malloc(np * sizeof(int64_t));
    if (!pl) {
        ocl_host->free(e);
        return oom(k, np * sizeof(int64_t));
    }
    int64_t *q = wf__einsum_plan(e, n, (const int64_t(*)[WF__EINSUM_LABELS])st, sum_label, ns, pl);
    ocl_host->free(e);
    /* up to three operands are passed as they are; more are packed into one scratch buffer */
    cl_mem ops[3] = {0}, bufs[2] = {0};
    size_t es = ocl_size(t);
    if (n <= 3) {
        for (int i = 0; i < 3; i++) ops[i] = ocl_mem(k->in[i < n ? i : 0]);
        for (int i = 0; i < n; i++) *q++ = (int64_t)ocl_off(k->in[i]);
        for (int i = 0; i < n; i++) *q++ = i;
    } else {
        size_t total = 0;
        for (int i = 0; i < n; i++) total += (size_t)k->in[i]->size;
        if (!(s = oclseq_buf(k, total * es, NULL, &bufs[0]))) {
            size_t at = 0;
            for (int i = 0; i < n && !s; i++) {
                size_t bytes = (size_t)k->in[i]->size * es;
                cl_int cs = bytes ? clEnqueueCopyBuffer(ocl_of(k)->q, ocl_mem(k->in[i]), bufs[0], k->in[i]->dev_offset,
                                                        at * es, bytes, 0, NULL, NULL)
                                  : CL_SUCCESS;
                if (cs != CL_SUCCESS) s = ocl_fail(k, cs, "operand packing");
                q[i] = (int64_t)at;
                q[n + i] = 0;
                at += (size_t)k->in[i]->size;
            }
        }
        ops[0] = ops[1] = ops[2] = bufs[0];
        q += 2 * n;
    }
    cl_kernel kern;
    if (!s) s = oclseq_buf(k, np * sizeof(int64_t), pl, &bufs[1]);
    if (!s) s = seq_kernel(k, t, "einsum", &kern);
    if (!s) {
        cl_mem ym = ocl_mem(y);
        cl_ulong yo = ocl_off(y);
        ocl_arg args[] = {OCL_ARG(ops[0]), OCL_ARG(ops[1]), OCL_ARG(ops[2]), OCL_ARG(bufs[1]), OCL_ARG(ym), OCL_ARG(yo)};
        size_t g = (size_t)ny;
        s = ocl_launch(k, kern, 6, args, 1, &g, NULL);
    }
    release(bufs, 2);
    ocl_host->free(pl);
    return s;
}

/* ---- NonZero ------------------------------------------------------------------------------------------ */

typedef struct dims_t {
    cl_long d[8];
} dims_t;

static wf_status *k_NonZero(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_dtype t = x->dtype;
    cl_ulong n = (cl_ulong)x->size, ch = 256;
    while (n / ch > 8192) ch *= 2;
    size_t nch = (size_t)((n + ch - 1) / ch);
    wf_tensor *y;
    wf_status *s;
    if (n == 0 || x->rank == 0) {
        /* a scalar has no coordinates: (0, nnz) either way, nothing to write */
        int64_t d[2] = {x->rank, n == 0 ? 0 : 1};
        if (n && x->rank == 0) {
            void *h;
            if ((s = oclew_read(k, x, &h))) return s;
            d[1] = oclew_load_f64(h, t, 0) != 0;
            ocl_host->free(h);
        }
        return ocl_host->kctx_output(k, 0, WF_I64, 2, d, &y);
    }
    cl_mem bufs[2] = {0};
    int64_t *cnt = ocl_host->malloc(nch * sizeof(int64_t));
    if (!cnt) return oom(k, nch * sizeof(int64_t));
    cl_kernel kc, kf;
    cl_mem xm = ocl_mem(x);
    cl_ulong xo = ocl_off(x);
    if ((s = oclseq_buf(k, nch * sizeof(int64_t), NULL, &bufs[0])) || (s = seq_kernel(k, t, "nz_count", &kc)))
        goto done;
    ocl_arg a1[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(n), OCL_ARG(ch), OCL_ARG(bufs[0])};
    if ((s = ocl_launch(k, kc, 5, a1, 1, &nch, NULL)) || (s = read_i64(k, bufs[0], nch, cnt))) goto done;
    cl_long nnz = wf__ku_exclusive_scan(cnt, (int64_t)nch);
    int64_t d[2] = {x->rank, nnz};
    if ((s = ocl_host->kctx_output(k, 0, WF_I64, 2, d, &y)) || nnz == 0) goto done;
    dims_t dims = {{0}};
    for (int i = 0; i < x->rank; i++) dims.d[i] = x->dims[i];
    cl_int rank = x->rank;
    cl_mem ym = ocl_mem(y);
    cl_ulong yo = ocl_off(y);
    if ((s = oclseq_buf(k, nch * sizeof(int64_t), cnt, &bufs[1])) || (s = seq_kernel(k, t, "nz_fill", &kf))) goto done;
    ocl_arg a2[] = {OCL_ARG(xm),  OCL_ARG(xo),  OCL_ARG(n),   OCL_ARG(ch),   OCL_ARG(bufs[1]),
                    OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(nnz), OCL_ARG(rank), OCL_ARG(dims)};
    s = ocl_launch(k, kf, 10, a2, 1, &nch, NULL);
done:
    release(bufs, 2);
    ocl_host->free(cnt);
    return s;
}

/* ---- Compress ----------------------------------------------------------------------------------------- */

static wf_status *k_Compress(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *cond = k->in[1];
    if (cond->dtype != WF_BOOL || cond->rank != 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "condition must be a 1-D bool tensor");
    const wf__attr *axa = ocl_host->attr_get(k->op, k->attrs, "axis");
    int ax;
    int64_t D, outer, inner;
    char err[256];
    if (!wf__ku_compress_plan(x->rank, x->dims, x->size, axa && axa->set, axa ? axa->i : 0, cond->size, &ax, &D, &outer,
                              &inner, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    /* the condition is a small 1-D mask: its selected indices are found here, the data moves on the device */
    uint8_t *cv;
    wf_status *s = oclew_read(k, cond, (void **)&cv);
    if (s) return s;
    int64_t *sel = ocl_host->malloc((size_t)(cond->size ? cond->size : 1) * sizeof(int64_t)), nnz = 0;
    if (!sel) {
        ocl_host->free(cv);
        return oom(k, (size_t)cond->size * sizeof(int64_t));
    }
    for (int64_t i = 0; i < cond->size; i++)
        if (cv[i]) sel[nnz++] = i;
    ocl_host->free(cv);
    int64_t d[WF_MAX_RANK];
    int r = wf__ku_compress_dims(x->rank, x->dims, ax, nnz, d);
    wf_tensor *y;
    cl_mem sm = NULL;
    cl_kernel kern;
    if (!(s = ocl_host->kctx_output(k, 0, x->dtype, r, d, &y)) && y->size > 0 &&
        !(s = oclseq_buf(k, (size_t)nnz * sizeof(int64_t), sel, &sm)) &&
        !(s = seq_kernel(k, x->dtype, "compress", &kern))) {
        cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(x), yo = ocl_off(y);
        cl_long Dl = D, nl = nnz, il = inner;
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(sm), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(Dl), OCL_ARG(nl),
                          OCL_ARG(il)};
        size_t g = (size_t)(outer * nnz * inner);
        s = ocl_launch(k, kern, 8, args, 1, &g, NULL);
    }
    if (sm) clReleaseMemObject(sm);
    ocl_host->free(sel);
    return s;
}

/* ---- Unique ------------------------------------------------------------------------------------------- */

static wf_status *k_Unique(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    wf_dtype t = X->dtype;
    const wf__attr *axa = ocl_host->attr_get(k->op, k->attrs, "axis");
    const wf__attr *sa = ocl_host->attr_get(k->op, k->attrs, "sorted");
    cl_int sorted = !sa || sa->i != 0;
    int a;
    int64_t n64, len64, inner64;
    char err[256];
    if (!wf__ku_unique_plan(X->rank, X->dims, X->size, axa && axa->set, axa ? axa->i : 0, &a, &n64, &len64, &inner64,
                            err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    cl_long n = n64, len = len64, inner = inner64;
    cl_mem bufs[4] = {0}; /* first, cnt, rank, ng */
    wf_status *s = NULL;
    int64_t ng = 0;
    cl_mem xm = ocl_mem(X);
    cl_ulong xo = ocl_off(X);
    size_t g = (size_t)n, one = 1;
    cl_kernel kg, kr, kc, kf;
    if (n > 0) {
        for (int i = 0; i < 4 && !s; i++) s = oclseq_buf(k, (i == 3 ? 1 : (size_t)n) * sizeof(int64_t), NULL, &bufs[i]);
        if (!s) s = seq_kernel(k, t, "uq_group", &kg);
        if (!s) s = seq_kernel(k, t, "uq_rank", &kr);
        if (!s) s = seq_kernel(k, t, "uq_count", &kc);
        if (!s) {
            ocl_arg a1[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(n), OCL_ARG(len), OCL_ARG(inner), OCL_ARG(bufs[0]),
                            OCL_ARG(bufs[1])};
            s = ocl_launch(k, kg, 7, a1, 1, &g, NULL);
        }
        if (!s) {
            ocl_arg a2[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(n), OCL_ARG(len), OCL_ARG(inner), OCL_ARG(sorted),
                            OCL_ARG(bufs[0]), OCL_ARG(bufs[2])};
            s = ocl_launch(k, kr, 8, a2, 1, &g, NULL);
        }
        if (!s) {
            ocl_arg a3[] = {OCL_ARG(bufs[0]), OCL_ARG(n), OCL_ARG(bufs[3])};
            s = ocl_launch(k, kc, 3, a3, 1, &one, NULL);
        }
        if (!s) s = read_i64(k, bufs[3], 1, &ng);
    }
    int64_t yd[WF_MAX_RANK], d_ng = ng, d_n = n;
    int yr = wf__ku_unique_dims(X->rank, X->dims, a, ng, yd);
    wf_tensor *y, *t1, *t2, *t3;
    if (!s && !(s = ocl_host->kctx_output(k, 0, t, yr, yd, &y)) && !(s = ocl_host->kctx_output(k, 1, WF_I64, 1, &d_ng, &t1)) &&
        !(s = ocl_host->kctx_output(k, 2, WF_I64, 1, &d_n, &t2)) && !(s = ocl_host->kctx_output(k, 3, WF_I64, 1, &d_ng, &t3)) &&
        n > 0 && !(s = seq_kernel(k, t, "uq_fill", &kf))) {
        cl_mem ym = ocl_mem(y), m1 = ocl_mem(t1), m2 = ocl_mem(t2), m3 = ocl_mem(t3);
        cl_ulong yo = ocl_off(y), o1 = ocl_off(t1), o2 = ocl_off(t2), o3 = ocl_off(t3);
        cl_long ngl = ng;
        ocl_arg a4[] = {OCL_ARG(xm),      OCL_ARG(xo), OCL_ARG(n),  OCL_ARG(len), OCL_ARG(inner), OCL_ARG(ngl),
                        OCL_ARG(bufs[0]), OCL_ARG(bufs[1]), OCL_ARG(bufs[2]), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(m1),
                        OCL_ARG(o1),      OCL_ARG(m2), OCL_ARG(o2), OCL_ARG(m3),  OCL_ARG(o3)};
        s = ocl_launch(k, kf, 17, a4, 1, &g, NULL);
    }
    release(bufs, 4);
    return s;
}

/* ---- NonMaxSuppression -------------------------------------------------------------------------------- */

/* Optional scalar input idx as a double (*has false when omitted or empty); an integer exactly in *iv. */
static wf_status *scalar_in(wf__kctx *k, int idx, bool *has, double *v, int64_t *iv)
{
    *has = false;
    if (idx >= k->n_in || !k->in[idx] || k->in[idx]->size == 0) return NULL;
    void *h;
    wf_dtype t = k->in[idx]->dtype;
    wf_status *s = oclew_read(k, k->in[idx], &h);
    if (s) return s;
    *v = oclew_is_float(t) ? oclew_load_f64(h, t, 0) : (double)oclew_load_i64(h, t, 0);
    if (iv) *iv = oclew_is_float(t) ? (int64_t)*v : oclew_load_i64(h, t, 0);
    *has = true;
    ocl_host->free(h);
    return NULL;
}

static wf_status *k_NonMaxSuppression(wf__kctx *k)
{
    const wf_tensor *B = k->in[0], *S = k->in[1];
    if (!wf__ku_nms_shapes(B->rank, B->dims, S->rank, S->dims, S->dtype == B->dtype))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "boxes and scores must be [B, S, 4] and [B, C, S] of one dtype");
    int64_t nb = B->dims[0], ns = B->dims[1], nc = S->dims[1], max_out = 0;
    double mo = 0, iou = 0, sthr = 0;
    bool has_mo, has_iou, use_thr;
    wf_status *s;
    char err[128];
    if ((s = scalar_in(k, 2, &has_mo, &mo, &max_out)) || (s = scalar_in(k, 3, &has_iou, &iou, NULL)) ||
        (s = scalar_in(k, 4, &use_thr, &sthr, NULL)))
        return s;
    if (!wf__ku_nms_limits(has_mo, max_out, iou, ns, &max_out, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    const wf__attr *ca = ocl_host->attr_get(k->op, k->attrs, "center_point_box");
    cl_int center = ca && ca->i != 0, ut = use_thr;
    size_t nbc = (size_t)(nb * nc);
    int64_t od[2] = {0, 3};
    wf_tensor *y;
    if (nbc == 0 || ns == 0 || max_out == 0) return ocl_host->kctx_output(k, 0, WF_I64, 2, od, &y);
    wf_dtype t = B->dtype;
    bool f64 = ocl_of(k)->fp64;
    cl_double thr_d = sthr, iou_d = iou;
    cl_float thr_f = (cl_float)sthr, iou_f = (cl_float)iou;
    ocl_arg thr = f64 ? OCL_ARG(thr_d) : OCL_ARG(thr_f), ioua = f64 ? OCL_ARG(iou_d) : OCL_ARG(iou_f);
    cl_mem bufs[4] = {0}; /* order, sel, nsel, start */
    int64_t *cnt = ocl_host->malloc(nbc * sizeof(int64_t));
    if (!cnt) return oom(k, nbc * sizeof(int64_t));
    cl_mem bm = ocl_mem(B), sm = ocl_mem(S);
    cl_ulong bo = ocl_off(B), so = ocl_off(S);
    cl_long Sl = ns, Cl = nc, mol = max_out;
    cl_kernel k1, k2, k3;
    size_t g1 = nbc * (size_t)ns;
    if ((s = oclseq_buf(k, g1 * sizeof(int64_t), NULL, &bufs[0])) ||
        (s = oclseq_buf(k, g1 * sizeof(int64_t), NULL, &bufs[1])) ||
        (s = oclseq_buf(k, nbc * sizeof(int64_t), NULL, &bufs[2])) || (s = seq_kernel(k, t, "nms_order", &k1)) ||
        (s = seq_kernel(k, t, "nms_greedy", &k2)) || (s = seq_kernel(k, t, "nms_out", &k3)))
        goto done;
    ocl_arg a1[] = {OCL_ARG(sm), OCL_ARG(so), OCL_ARG(Sl), OCL_ARG(ut), thr, OCL_ARG(bufs[0])};
    if ((s = ocl_launch(k, k1, 6, a1, 1, &g1, NULL))) goto done;
    ocl_arg a2[] = {OCL_ARG(bm), OCL_ARG(bo), OCL_ARG(sm), OCL_ARG(so), OCL_ARG(Sl), OCL_ARG(Cl), OCL_ARG(ut), thr,
                    ioua, OCL_ARG(center), OCL_ARG(mol), OCL_ARG(bufs[0]), OCL_ARG(bufs[1]), OCL_ARG(bufs[2])};
    if ((s = ocl_launch(k, k2, 14, a2, 1, &nbc, NULL)) || (s = read_i64(k, bufs[2], nbc, cnt))) goto done;
    int64_t nout = wf__ku_exclusive_scan(cnt, (int64_t)nbc);
    od[0] = nout;
    if ((s = ocl_host->kctx_output(k, 0, WF_I64, 2, od, &y)) || nout == 0) goto done;
    if ((s = oclseq_buf(k, nbc * sizeof(int64_t), cnt, &bufs[3]))) goto done;
    cl_mem ym = ocl_mem(y);
    cl_ulong yo = ocl_off(y);
    ocl_arg a3[] = {OCL_ARG(bufs[1]), OCL_ARG(bufs[2]), OCL_ARG(bufs[3]), OCL_ARG(Sl), OCL_ARG(Cl), OCL_ARG(ym),
                    OCL_ARG(yo)};
    s = ocl_launch(k, k3, 7, a3, 1, &nbc, NULL);
done:
    release(bufs, 4);
    ocl_host->free(cnt);
    return s;
}

/* ---- table -------------------------------------------------------------------------------------------- */

const wf__kernel_def ocl_kernels_seq[] = {
    {"Einsum", "OPENCL", WF__DT_NUMERIC, 0, k_Einsum, NULL, 0},
    {"NonZero", "OPENCL", WF__DT_ALL, 0, k_NonZero, NULL, 0},
    {"Compress", "OPENCL", WF__DT_ALL, 0, k_Compress, NULL, 0},
    {"Unique", "OPENCL", WF__DT_ALL, 0, k_Unique, NULL, 0},
    {"NonMaxSuppression", "OPENCL", WF__DT_FLOATS, 0, k_NonMaxSuppression, NULL, 0},
    {"RNN", "OPENCL", WF__DT_FLOATS, 0, oclseq_k_rnn, NULL, 0},
    {"GRU", "OPENCL", WF__DT_FLOATS, 0, oclseq_k_rnn, NULL, 0},
    {"LSTM", "OPENCL", WF__DT_FLOATS, 0, oclseq_k_rnn, NULL, 0},
    {"Attention", "OPENCL", WF__DT_FLOATS, 0, oclseq_k_attention, NULL, 0},
    {NULL},
};
