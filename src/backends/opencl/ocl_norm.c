/*
 * OpenCL kernels: the reductions beyond the basic ones (ReduceL1, ReduceSumSquare, ReduceLogSum,
 * ReduceLogSumExp, bool ReduceMin/ReduceMax), GlobalMaxPool, LpPool, Hardmax, LpNormalization, TopK and
 * Det, plus the family's single program source and kernel table (the normalisations and losses are in
 * ocl_norm_loss.c). Semantics are the CPU's (k_misc_norm.c, k_math_axis.c, k_onnx.c): floats go through DBL.
 */
#include <stdio.h>

#include "backends/opencl/ocl_norm.h"
#include "ops/kutil_conv.h"
#include "ops/kutil_reduce.h"

/* ---- kernel source ------------------------------------------------------------------------------------- */

/* One program for the whole family, built once per dtype; kernels a dtype cannot run (the float-only
 * ones for integers) are compiled out. */
static const char *g_src = OCL_NNR_PRELUDE
    "#define UNPACK8(v, a) a[0] = v.s0; a[1] = v.s1; a[2] = v.s2; a[3] = v.s3; a[4] = v.s4; a[5] = v.s5; \\\n"
    "  a[6] = v.s6; a[7] = v.s7\n"
    /* element offset of index o over n dims (innermost last) */
    "ulong goff(ulong o, int n, const ulong *d, const ulong *s) {\n"
    "  ulong off = 0;\n"
    "  for (int i = n - 1; i >= 0; i--) { off += (o % d[i]) * s[i]; o /= d[i]; }\n"
    "  return off;\n"
    "}\n"
    /* float to integer as the CPU's store: truncation, NaN 0, saturation at the int64 range */
    /* literals of DBL's precision: a double literal is an error without fp64 */
    "#ifdef HAS_F64\n#define EPS9 1e-9\n#else\n#define EPS9 1e-9f\n#endif\n"
    "long d2l(DBL v) {\n"
    "  if (isnan(v)) return 0;\n"
    "  if (v >= (DBL)0x1p63f) return LONG_MAX;\n"
    "  if (v <= (DBL)-0x1p63f) return LONG_MIN;\n"
    "  return (long)v;\n"
    "}\n"
    "#ifdef IS_INT\n"
    "#define STR(p, i, v) ST(p, i, d2l(v))\n"
    "#else\n"
    "#define STR(p, i, v) ST(p, i, (CT)(v))\n"
    "#endif\n"
    /* ---- reductions: op 0 L1, 1 sum of squares, 2 log-sum, 3 log-sum-exp, 4 min, 5 max ---- */
    "__kernel void red(__global const T *x, ulong xo, __global T *y, ulong yo, int op, int nk, ulong8 kd8,\n"
    "                  ulong8 ks8, int nr, ulong8 rd8, ulong8 rs8, ulong count, long empty) {\n"
    "  ulong kd[8], ks[8], rd[8], rs[8];\n"
    "  UNPACK8(kd8, kd); UNPACK8(ks8, ks); UNPACK8(rd8, rd); UNPACK8(rs8, rs);\n"
    "  ulong o = get_global_id(0);\n"
    "  const __global T *p = x + xo + goff(o, nk, kd, ks);\n"
    "  y += yo;\n"
    "#ifdef IS_INT\n"
    /* integer L1 and sum of squares wrap in 64 bits like numpy; min and max stay exact */
    "  if (op <= 1) {\n"
    "    ulong acc = 0;\n"
    "    for (ulong i = 0; i < count; i++) {\n"
    "      long v = LD(p, goff(i, nr, rd, rs));\n"
    "      acc += op == 0 ? (v < 0 ? (ulong)0 - (ulong)v : (ulong)v) : (ulong)v * (ulong)v;\n"
    "    }\n"
    "    ST(y, o, (long)acc);\n"
    "    return;\n"
    "  }\n"
    "  if (op >= 4) {\n"
    "    long acc = op == 4 ? LONG_MAX : LONG_MIN;\n"
    "    for (ulong i = 0; i < count; i++) {\n"
    "      long v = LD(p, goff(i, nr, rd, rs));\n"
    "      acc = op == 4 ? min(acc, v) : max(acc, v);\n"
    "    }\n"
    "    ST(y, o, count ? acc : empty);\n"
    "    return;\n"
    "  }\n"
    "#endif\n"
    "  if (op >= 3) {\n"
    /* a NaN wins and stays */
    "    DBL m = op == 4 ? INFINITY : -INFINITY;\n"
    "    for (ulong i = 0; i < count; i++) {\n"
    "      DBL v = (DBL)LD(p, goff(i, nr, rd, rs));\n"
    "      m = (op == 4 ? v < m : v > m) || isnan(v) ? v : m;\n"
    "    }\n"
    /* all -inf, empty, +inf or NaN: the max is the log-sum-exp too */
    "    if (op != 3 || isinf(m) || isnan(m)) { STR(y, o, m); return; }\n"
    "    DBL acc = 0;\n"
    "    for (ulong i = 0; i < count; i++) acc += exp((DBL)LD(p, goff(i, nr, rd, rs)) - m);\n"
    "    STR(y, o, log(acc) + m);\n"
    "    return;\n"
    "  }\n"
    "  DBL acc = 0;\n"
    "  for (ulong i = 0; i < count; i++) {\n"
    "    DBL v = (DBL)LD(p, goff(i, nr, rd, rs));\n"
    "    acc += op == 0 ? fabs(v) : op == 1 ? v * v : v;\n"
    "  }\n"
    "  STR(y, o, op == 2 ? log(acc) : acc);\n"
    "}\n"
    /* red for few long folds: one output per work-group of RWG, each work-item folding every RWG-th
     * element, lane 0 combining the partials. Every work-item reaches every barrier (no early return:
     * PoCL hangs on a return before a barrier even when the whole group takes it). */
    "#define RWG 128\n"
    "__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))\n"
    "void red_wg(__global const T *x, ulong xo, __global T *y, ulong yo, int op, int nk, ulong8 kd8,\n"
    "            ulong8 ks8, int nr, ulong8 rd8, ulong8 rs8, ulong count, long empty) {\n"
    "  __local DBL pd[RWG], pe[RWG];\n"
    "  __local long pl[RWG];\n"
    "  ulong kd[8], ks[8], rd[8], rs[8];\n"
    "  UNPACK8(kd8, kd); UNPACK8(ks8, ks); UNPACK8(rd8, rd); UNPACK8(rs8, rs);\n"
    "  ulong o = get_group_id(0), lid = get_local_id(0);\n"
    "  const __global T *p = x + xo + goff(o, nk, kd, ks);\n"
    "  y += yo;\n"
    "#ifdef IS_INT\n"
    "  bool ip = op <= 1 || op >= 4;\n"
    "#else\n"
    "  bool ip = false;\n"
    "#endif\n"
    "  ulong iacc = op == 4 ? (ulong)LONG_MAX : op == 5 ? (ulong)LONG_MIN : 0;\n"
    "  DBL m = op == 4 ? INFINITY : -INFINITY, acc = 0, acc2 = 0;\n"
    "  for (ulong i = lid; i < count; i += RWG) {\n"
    "#ifdef IS_INT\n"
    "    if (ip) {\n"
    "      long v = LD(p, goff(i, nr, rd, rs));\n"
    "      if (op == 0) iacc += v < 0 ? (ulong)0 - (ulong)v : (ulong)v;\n"
    "      else if (op == 1) iacc += (ulong)v * (ulong)v;\n"
    "      else iacc = (ulong)(op == 4 ? min((long)iacc, v) : max((long)iacc, v));\n"
    "      continue;\n"
    "    }\n"
    "#endif\n"
    "    DBL v = (DBL)LD(p, goff(i, nr, rd, rs));\n"
    "    if (op >= 3) m = (op == 4 ? v < m : v > m) || isnan(v) ? v : m;\n"
    "    else acc += op == 0 ? fabs(v) : op == 1 ? v * v : v;\n"
    "  }\n"
    "  pl[lid] = (long)iacc;\n"
    "  pd[lid] = op >= 3 ? m : acc;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    /* every work-item needs the group's max for the second pass of log-sum-exp */
    "  if (op >= 3) for (int j = 0; j < RWG; j++) { DBL v = pd[j]; m = (op == 4 ? v < m : v > m) || isnan(v) ? v : m; }\n"
    "  bool lse = !ip && op == 3 && !isinf(m) && !isnan(m);\n"
    "  if (lse) for (ulong i = lid; i < count; i += RWG) acc2 += exp((DBL)LD(p, goff(i, nr, rd, rs)) - m);\n"
    "  pe[lid] = acc2;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  if (lid == 0) {\n"
    "    if (ip) {\n"
    "#ifdef IS_INT\n"
    "      for (int j = 1; j < RWG; j++) {\n"
    "        long v = pl[j];\n"
    "        iacc = op <= 1 ? iacc + (ulong)v : (ulong)(op == 4 ? min((long)iacc, v) : max((long)iacc, v));\n"
    "      }\n"
    "      ST(y, o, op >= 4 && !count ? empty : (long)iacc);\n"
    "#endif\n"
    "    } else if (lse) {\n"
    "      for (int j = 1; j < RWG; j++) acc2 += pe[j];\n"
    "      STR(y, o, log(acc2) + m);\n"
    "    } else if (op >= 3) {\n"
    /* max, min, and log-sum-exp whose max is infinite or NaN */
    "      STR(y, o, m);\n"
    "    } else {\n"
    "      for (int j = 1; j < RWG; j++) acc += pd[j];\n"
    "      STR(y, o, op == 2 ? log(acc) : acc);\n"
    "    }\n"
    "  }\n"
    "}\n"
    /* ---- TopK: one work-item per element computes its rank in the line's order (a strict total order:
     * NaN is the largest, ties keep the lower index first) and writes itself if the rank is below K ---- */
    "bool before(CT w, ulong j, CT v, ulong t, int largest) {\n"
    "  bool wn = ISNAN(w), vn = ISNAN(v);\n"
    "  if (wn != vn) return largest ? wn : vn;\n"
    "  if (!wn && w != v) return largest ? w > v : w < v;\n"
    "  return j < t;\n"
    "}\n"
    "__kernel void topk(__global const T *x, ulong xo, __global T *y, ulong yo, __global long *yi, ulong yio,\n"
    "                   ulong D, ulong K, ulong inner, int largest) {\n"
    "  ulong g = get_global_id(0), t = g % D, line = g / D, o = line / inner, i = line % inner;\n"
    "  const __global T *p = x + xo + o * D * inner + i;\n"
    "  CT v = LD(p, t * inner);\n"
    "  ulong rank = 0;\n"
    "  for (ulong j = 0; j < D && rank < K; j++)\n"
    "    if (j != t && before(LD(p, j * inner), j, v, t, largest)) rank++;\n"
    "  if (rank < K) {\n"
    "    ulong q = (o * K + rank) * inner + i;\n"
    "    ST(y, yo + q, v);\n"
    "    yi[yio + q] = (long)t;\n"
    "  }\n"
    "}\n"
    "#ifndef IS_INT\n"
    /* ---- Hardmax: 1 at the first maximum of each line; the first NaN counts as the maximum ---- */
    "__kernel void hardmax(__global const T *x, ulong xo, __global T *y, ulong yo, ulong n, ulong inner) {\n"
    "  ulong l = get_global_id(0), base = (l / inner) * n * inner + l % inner;\n"
    "  x += xo + base; y += yo + base;\n"
    "  ulong best = 0;\n"
    "  CT bv = LD(x, 0);\n"
    "  for (ulong i = 1; i < n && !isnan(bv); i++) {\n"
    "    CT v = LD(x, i * inner);\n"
    "    if (v > bv || isnan(v)) { bv = v; best = i; }\n"
    "  }\n"
    "  for (ulong i = 0; i < n; i++) ST(y, i * inner, i == best ? (CT)1 : (CT)0);\n"
    "}\n"
    /* ---- LpNormalization (p 1 or 2); a zero norm gives 0 ---- */
    "__kernel void lpnorm(__global const T *x, ulong xo, __global T *y, ulong yo, ulong n, ulong inner, int p) {\n"
    "  ulong l = get_global_id(0), base = (l / inner) * n * inner + l % inner;\n"
    "  x += xo + base; y += yo + base;\n"
    "  DBL s = 0;\n"
    "  for (ulong i = 0; i < n; i++) { DBL v = (DBL)LD(x, i * inner); s += p == 1 ? fabs(v) : v * v; }\n"
    "  DBL norm = p == 1 ? s : sqrt(s);\n"
    "  for (ulong i = 0; i < n; i++) ST(y, i * inner, norm == 0 ? (CT)0 : (CT)((DBL)LD(x, i * inner) / norm));\n"
    "}\n"
    /* ---- LpPool: one output per work-item, the window walked in full with padding skipped ---- */
    "__kernel void lppool(__global const T *x, ulong xo, __global T *y, ulong yo, int ns, long8 xi8, long8 yo8,\n"
    "                     long8 k8, long8 s8, long8 d8, long8 pb8, long8 is8, ulong in_plane, ulong out_plane,\n"
    "                     ulong win, DBL p) {\n"
    "  long xd[8], od[8], kk[8], st[8], dl[8], pb[8], xs[8];\n"
    "  UNPACK8(xi8, xd); UNPACK8(yo8, od); UNPACK8(k8, kk); UNPACK8(s8, st); UNPACK8(d8, dl);\n"
    "  UNPACK8(pb8, pb); UNPACK8(is8, xs);\n"
    "  ulong o = get_global_id(0), plane = o / out_plane, r = o % out_plane;\n"
    "  long oc[8];\n"
    "  for (int i = ns - 1; i >= 0; i--) { oc[i] = (long)(r % (ulong)od[i]); r /= (ulong)od[i]; }\n"
    "  const __global T *xp = x + xo + plane * in_plane;\n"
    "  DBL acc = 0;\n"
    "  for (ulong w = 0; w < win; w++) {\n"
    "    ulong ww = w;\n"
    "    long off = 0;\n"
    "    bool inside = true;\n"
    "    for (int i = ns - 1; i >= 0 && inside; i--) {\n"
    "      long ki = (long)(ww % (ulong)kk[i]);\n"
    "      ww /= (ulong)kk[i];\n"
    "      long c = oc[i] * st[i] - pb[i] + ki * dl[i];\n"
    "      if (c < 0 || c >= xd[i]) inside = false;\n"
    "      off += c * xs[i];\n"
    "    }\n"
    "    if (!inside) continue;\n"
    "    DBL a = fabs((DBL)LD(xp, off));\n"
    "    acc += p == 2 ? a * a : p == 1 ? a : pow(a, p);\n"
    "  }\n"
    "  ST(y, yo + o, (CT)(p == 2 ? sqrt(acc) : p == 1 ? acc : pow(acc, 1 / p)));\n"
    "}\n"
    /* ---- Det: LU with partial pivoting in a DBL scratch, one matrix per work-item (as LAPACK's getrf,
     * which numpy.linalg.det uses) ---- */
    "__kernel void det(__global const T *x, ulong xo, __global T *y, ulong yo, __global DBL *a, ulong m) {\n"
    "  ulong b = get_global_id(0), mm = m * m;\n"
    "  x += xo + b * mm; a += b * mm;\n"
    "  for (ulong i = 0; i < mm; i++) a[i] = (DBL)LD(x, i);\n"
    "  DBL det = 1;\n"
    "  for (ulong c = 0; c < m; c++) {\n"
    "    ulong piv = c;\n"
    "    DBL best = fabs(a[c * m + c]);\n"
    "    for (ulong r = c + 1; r < m; r++)\n"
    "      if (fabs(a[r * m + c]) > best) { best = fabs(a[r * m + c]); piv = r; }\n"
    "    if (piv != c) {\n"
    "      for (ulong q = 0; q < m; q++) { DBL t = a[c * m + q]; a[c * m + q] = a[piv * m + q]; a[piv * m + q] = t; }\n"
    "      det = -det;\n"
    "    }\n"
    "    DBL d = a[c * m + c];\n"
    "    det *= d;\n"
    "    if (d == 0) break;\n"
    "    for (ulong r = c + 1; r < m; r++) {\n"
    "      DBL f = a[r * m + c] / d;\n"
    "      if (f == 0) continue;\n"
    "      for (ulong q = c + 1; q < m; q++) a[r * m + q] -= f * a[c * m + q];\n"
    "    }\n"
    "  }\n"
    "  ST(y, yo + b, (CT)det);\n"
    "}\n"
    /* ---- Group/InstanceNormalization: one work-item per group of len contiguous elements; scale and
     * bias per channel, or per group (opset 18) ---- */
    "__kernel void gnorm(__global const T *x, ulong xo, __global T *y, ulong yo, __global const T *sc, ulong so,\n"
    "                    __global const T *bi, ulong bo, ulong len, ulong S, ulong C, ulong G, int per_group,\n"
    "                    DBL eps) {\n"
    "  ulong g = get_global_id(0), base = g * len;\n"
    "  x += xo; y += yo; sc += so; bi += bo;\n"
    "  DBL m = 0, v = 0;\n"
    "  for (ulong i = 0; i < len; i++) m += (DBL)LD(x, base + i);\n"
    "  m /= (DBL)len;\n"
    "  for (ulong i = 0; i < len; i++) { DBL d = (DBL)LD(x, base + i) - m; v += d * d; }\n"
    "  DBL inv = 1 / sqrt(v / (DBL)len + eps);\n"
    "  ulong cs = (C / G) * S;\n"
    "  for (ulong i = 0; i < len; i++) {\n"
    "    ulong e = base + i, c = per_group ? (e / cs) % G : (e / S) % C;\n"
    "    DBL r = ((DBL)LD(x, e) - m) * inv;\n"
    "    ST(y, e, (CT)(r * (DBL)LD(sc, c) + (DBL)LD(bi, c)));\n"
    "  }\n"
    "}\n"
    /* ---- RMSNormalization: one row of M per work-item; the scale broadcasts over the row through
     * strides ss (0 where it broadcasts) ---- */
    "__kernel void rmsnorm(__global const T *x, ulong xo, __global T *y, ulong yo, __global const T *sc, ulong so,\n"
    "                      ulong M, int nr, ulong8 nd8, ulong8 ss8, DBL eps) {\n"
    "  ulong row = get_global_id(0), nd[8], ss[8];\n"
    "  UNPACK8(nd8, nd); UNPACK8(ss8, ss);\n"
    "  x += xo + row * M; y += yo + row * M; sc += so;\n"
    "  DBL v = 0;\n"
    "  for (ulong i = 0; i < M; i++) { DBL d = (DBL)LD(x, i); v += d * d; }\n"
    "  DBL inv = 1 / sqrt(v / (DBL)M + eps);\n"
    "  for (ulong i = 0; i < M; i++) ST(y, i, (CT)((DBL)LD(x, i) * inv * (DBL)LD(sc, goff(i, nr, nd, ss))));\n"
    "}\n"
    /* ---- MeanVarianceNormalization over a reduction plan: (x - mean) / (sqrt(var) + 1e-9) ---- */
    "__kernel void mvn(__global const T *x, ulong xo, __global T *y, ulong yo, int nk, ulong8 kd8, ulong8 ks8,\n"
    "                  int nr, ulong8 rd8, ulong8 rs8, ulong count) {\n"
    "  ulong kd[8], ks[8], rd[8], rs[8];\n"
    "  UNPACK8(kd8, kd); UNPACK8(ks8, ks); UNPACK8(rd8, rd); UNPACK8(rs8, rs);\n"
    "  ulong base = goff(get_global_id(0), nk, kd, ks);\n"
    "  x += xo + base; y += yo + base;\n"
    "  DBL m = 0, v = 0;\n"
    "  for (ulong i = 0; i < count; i++) m += (DBL)LD(x, goff(i, nr, rd, rs));\n"
    "  m /= (DBL)count;\n"
    "  for (ulong i = 0; i < count; i++) { DBL d = (DBL)LD(x, goff(i, nr, rd, rs)) - m; v += d * d; }\n"
    "  DBL den = sqrt(v / (DBL)count) + EPS9;\n"
    "  for (ulong i = 0; i < count; i++) { ulong e = goff(i, nr, rd, rs); ST(y, e, (CT)(((DBL)LD(x, e) - m) / den)); }\n"
    "}\n"
    /* ---- LRN over channels (dim 1) of [N, C, S] ---- */
    "__kernel void lrn(__global const T *x, ulong xo, __global T *y, ulong yo, ulong C, ulong S, long lo, long hi,\n"
    "                  DBL alpha, DBL beta, DBL bias, DBL size) {\n"
    "  ulong g = get_global_id(0), i = g % S, c = (g / S) % C, n = g / (S * C);\n"
    "  x += xo; y += yo;\n"
    "  DBL sq = 0;\n"
    "  for (long q = (long)c - lo; q <= (long)c + hi; q++)\n"
    "    if (q >= 0 && q < (long)C) { DBL v = (DBL)LD(x, (n * C + (ulong)q) * S + i); sq += v * v; }\n"
    "  ST(y, g, (CT)((DBL)LD(x, g) / pow(bias + alpha / size * sq, beta)));\n"
    "}\n"
    /* ---- losses: log-softmax over C of each (n, d), stored in T (the CPU rounds it to the dtype) ---- */
    "__kernel void logsm(__global const T *x, ulong xo, __global T *lp, ulong lpo, ulong C, ulong D) {\n"
    "  ulong g = get_global_id(0), base = (g / D) * C * D + g % D;\n"
    "  x += xo + base; lp += lpo + base;\n"
    "  DBL m = -INFINITY, s = 0;\n"
    "  for (ulong c = 0; c < C; c++) { DBL v = (DBL)LD(x, c * D); m = v > m || isnan(v) ? v : m; }\n"
    "  for (ulong c = 0; c < C; c++) s += exp((DBL)LD(x, c * D) - m);\n"
    "  DBL ls = log(s);\n"
    "  for (ulong c = 0; c < C; c++) ST(lp, c * D, (CT)((DBL)LD(x, c * D) - m - ls));\n"
    "}\n"
    /* -lp[n, t, d] * weight[t] per (n, d), rounded to T; ignored targets give 0 with weight 0. Targets are
     * read as int pairs when they are i64 (little-endian) so one kernel serves both index dtypes. */
    "__kernel void nll(__global const T *lp, ulong lpo, __global const int *tg, ulong to, int t64,\n"
    "                  __global const T *w, ulong wo, int has_w, int has_ign, long ign, __global T *l, ulong lo,\n"
    "                  __global DBL *ws, ulong C, ulong D) {\n"
    "  ulong i = get_global_id(0), n = i / D, d = i % D;\n"
    "  long tv = t64 ? (long)(((ulong)(uint)tg[2 * (to + i) + 1] << 32) | (ulong)(uint)tg[2 * (to + i)]) : tg[to + i];\n"
    "  if ((has_ign && tv == ign) || tv < 0 || tv >= (long)C) { ST(l, lo + i, (CT)0); ws[i] = 0; return; }\n"
    "  DBL wt = has_w ? (DBL)LD(w, wo + (ulong)tv) : 1;\n"
    "  ST(l, lo + i, (CT)(-(DBL)LD(lp, lpo + (n * C + (ulong)tv) * D + d) * wt));\n"
    "  ws[i] = wt;\n"
    "}\n"
    /* sum (or weighted mean) of the rounded per-element losses, in one work-group of NWG */
    "#define NWG 64\n"
    "__kernel __attribute__((reqd_work_group_size(NWG, 1, 1)))\n"
    "void nll_red(__global const T *l, ulong lo, __global const DBL *ws, ulong n, int mean, __global T *y,\n"
    "             ulong yo) {\n"
    "  __local DBL ps[NWG], pw[NWG];\n"
    "  ulong lid = get_local_id(0);\n"
    "  DBL s = 0, sw = 0;\n"
    "  for (ulong i = lid; i < n; i += NWG) { s += (DBL)LD(l, lo + i); sw += ws[i]; }\n"
    "  ps[lid] = s; pw[lid] = sw;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  if (lid == 0) {\n"
    "    for (int j = 1; j < NWG; j++) { s += ps[j]; sw += pw[j]; }\n"
    "    ST(y, yo, (CT)(mean ? s / sw : s));\n"
    "  }\n"
    "}\n"
    "#endif\n";

wf_status *ocl_norm_kernel(wf__kctx *k, wf_dtype t, const char *name, cl_kernel *out)
{
    return ocl_nnr_kernel(k, "norm", g_src, t, name, out);
}

wf_status *ocl_norm_scratch(wf__kctx *k, size_t n, cl_mem *out)
{
    cl_int st;
    *out = clCreateBuffer(ocl_of(k)->ctx, CL_MEM_READ_WRITE, n ? n : 1, NULL, &st);
    return *out ? NULL : ocl_fail(k, st, "scratch buffer allocation");
}

void ocl_norm_plan_make(const wf_tensor *x, unsigned mask, ocl_norm_plan *p)
{
    bool red[WF_MAX_RANK];
    for (int i = 0; i < x->rank; i++) red[i] = (mask >> i) & 1u;
    wf__ku_red_plan q;
    wf__ku_reduce_plan(x->rank, x->dims, red, &q);
    memset(p, 0, sizeof *p);
    p->count = (cl_ulong)q.count;
    p->nk = q.nk;
    p->nr = q.nr;
    for (int i = 0; i < WF_MAX_RANK && i < 8; i++) {
        p->kd.s[i] = (cl_ulong)q.kd[i];
        p->ks.s[i] = (cl_ulong)q.ks[i];
        p->rd.s[i] = (cl_ulong)q.rd[i];
        p->rs.s[i] = (cl_ulong)q.rs[i];
    }
}

/* ---- Reduce{L1,SumSquare,LogSum,LogSumExp}, bool ReduceMin/ReduceMax, GlobalMaxPool ------------------- */

/* The folded axes of a Reduce* node as a bit mask: from the axes attribute or input 1 (read back), all
 * axes when none are given, none with noop_with_empty_axes (each output then folds one element). */
static wf_status *reduce_mask(wf__kctx *k, const wf_tensor *x, unsigned *mask)
{
    const wf__attr *attr = ocl_host->attr_get(k->op, k->attrs, "axes");
    const wf_tensor *at = k->n_in > 1 ? k->in[1] : NULL;
    int64_t axes[WF_MAX_RANK];
    int n = 0;
    char b0[160];
    if (!wf__ku_axes_attr(attr, at != NULL, axes, &n, b0, sizeof b0))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", b0);
    if (!attr->set && at) {
        if ((at->dtype != WF_I64 && at->dtype != WF_I32) || at->rank > 1 || at->size > WF_MAX_RANK)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                       "axes input must be 1-D i64 or i32 with at most %d values, got %s", WF_MAX_RANK,
                                       ocl_nnr_tstr(at, b0));
        n = (int)at->size;
        int64_t raw[WF_MAX_RANK];
        wf_status *s = ocl_nnr_read(k, at, raw, (size_t)n * ocl_size(at->dtype));
        if (s) return s;
        for (int i = 0; i < n; i++) axes[i] = ocl_nnr_int_at(raw, at->dtype, i);
    }
    bool red[WF_MAX_RANK];
    int bad = 0;
    if (wf__ku_axes_mark(axes, n, x->rank, red, &bad))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for input %s",
                                   (long long)axes[bad], ocl_nnr_tstr(x, b0));
    *mask = 0;
    for (int i = 0; i < x->rank; i++) *mask |= (unsigned)red[i] << i;
    if (!n && !ocl_host->attr_get(k->op, k->attrs, "noop_with_empty_axes")->i)
        *mask = x->rank ? (1u << x->rank) - 1 : 0;
    return NULL;
}

/* red_wg's work-group size (as in the source) and when it pays: few outputs, long folds */
#define RWG 128
#define RED_WG_MAX_OUT 256
#define RED_WG_MIN_COUNT 8192

enum { R_L1, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP, R_MIN, R_MAX };

/* Folds the axes in mask with op into a new output 0 (keepdims: folded axes stay as 1). */
static wf_status *reduce_run(wf__kctx *k, unsigned mask, bool keep, cl_int op)
{
    const wf_tensor *x = k->in[0];
    int64_t yd[WF_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        if (!(mask & (1u << d))) yd[r++] = x->dims[d];
        else if (keep) yd[r++] = 1;
    }
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, r, yd, &y);
    if (s || !y->size) return s;
    ocl_norm_plan p;
    ocl_norm_plan_make(x, mask, &p);
    cl_kernel kern;
    /* few outputs with long folds take a work-group each; the kernel's own limit may be below RWG */
    bool wg = y->size <= RED_WG_MAX_OUT && p.count >= RED_WG_MIN_COUNT && ocl_of(k)->max_wg >= RWG;
    if (wg) {
        size_t kwg = 0;
        if ((s = ocl_norm_kernel(k, x->dtype, "red_wg", &kern))) return s;
        wg = clGetKernelWorkGroupInfo(kern, ocl_of(k)->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) ==
                 CL_SUCCESS &&
             kwg >= RWG;
    }
    if (!wg && (s = ocl_norm_kernel(k, x->dtype, "red", &kern))) return s;
    /* an empty bool min is true and an empty bool max false (numpy's identities) */
    cl_long empty = op == R_MIN ? 1 : 0;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(op),      OCL_ARG(p.nk),   OCL_ARG(p.kd),
                      OCL_ARG(p.ks), OCL_ARG(p.nr), OCL_ARG(p.rd), OCL_ARG(p.rs), OCL_ARG(p.count), OCL_ARG(empty)};
    size_t gsz = (size_t)y->size * (wg ? RWG : 1), lsz = RWG;
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, wg ? &lsz : NULL);
}

static wf_status *k_reduce(wf__kctx *k)
{
    static const char *const names[] = {"ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
                                        "ReduceMin", "ReduceMax"};
    cl_int op = 0;
    for (int i = 0; i < 6; i++)
        if (!strcmp(k->op->name, names[i])) op = i;
    unsigned mask;
    wf_status *s = reduce_mask(k, k->in[0], &mask);
    if (s) return s;
    return reduce_run(k, mask, ocl_host->attr_get(k->op, k->attrs, "keepdims")->i != 0, op);
}

static wf_status *k_global_max_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank < 3)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 3", ocl_nnr_tstr(x, b));
    return reduce_run(k, ((1u << x->rank) - 1) & ~3u, true, R_MAX);
}

/* ---- Hardmax, LpNormalization ------------------------------------------------------------------------------ */

/* x as [outer, n, inner] around the node's axis attribute. */
static wf_status *axis_split(wf__kctx *k, int64_t *outer, int64_t *n, int64_t *inner)
{
    const wf_tensor *x = k->in[0];
    int64_t a = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    int axis;
    if (x->rank == 0 || !wf__ku_norm_axis(a, x->rank, &axis))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
    *n = x->dims[axis];
    return NULL;
}

static wf_status *k_line(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    bool lp = !strcmp(k->op->name, "LpNormalization");
    cl_int p = lp ? (cl_int)ocl_host->attr_get(k->op, k->attrs, "p")->i : 0;
    if (lp && p != 1 && p != 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "attribute 'p' must be 1 or 2, got %d", (int)p);
    int64_t outer = 0, n = 0, inner = 0;
    wf_status *s = axis_split(k, &outer, &n, &inner);
    wf_tensor *y;
    if (s || (s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !x->size) return s;
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, lp ? "lpnorm" : "hardmax", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), nn = (cl_ulong)n, in = (cl_ulong)inner;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(nn), OCL_ARG(in), OCL_ARG(p)};
    size_t gsz = (size_t)(outer * inner);
    return ocl_launch(k, kern, lp ? 7 : 6, args, 1, &gsz, NULL);
}

/* ---- TopK --------------------------------------------------------------------------------------------------- */

static wf_status *k_topk(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *kt = k->in[1];
    char b[160];
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    int a;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                   ocl_nnr_tstr(x, b));
    if ((kt->dtype != WF_I64 && kt->dtype != WF_I32) || kt->size != 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "K must be a single i64 value, got %s", ocl_nnr_tstr(kt, b));
    int64_t raw = 0;
    wf_status *s = ocl_nnr_read(k, kt, &raw, ocl_size(kt->dtype));
    if (s) return s;
    int64_t K = ocl_nnr_int_at(&raw, kt->dtype, 0);
    if (K < 0 || K > x->dims[a])
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "K = %lld is out of range for axis %d of input %s", (long long)K,
                                   a, ocl_nnr_tstr(x, b));
    int64_t yd[WF_MAX_RANK], outer = 1, inner = 1, D = x->dims[a];
    for (int d = 0; d < x->rank; d++) {
        yd[d] = d == a ? K : x->dims[d];
        if (d < a) outer *= x->dims[d];
        if (d > a) inner *= x->dims[d];
    }
    wf_tensor *y, *yi;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, yd, &y))) return s;
    if ((s = ocl_host->kctx_output(k, 1, WF_I64, x->rank, yd, &yi)) || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, "topk", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y), im = ocl_mem(yi);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), io = ocl_off(yi), Du = (cl_ulong)D, Ku = (cl_ulong)K,
             in = (cl_ulong)inner;
    cl_int largest = ocl_host->attr_get(k->op, k->attrs, "largest")->i != 0;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(im),
                      OCL_ARG(io), OCL_ARG(Du), OCL_ARG(Ku), OCL_ARG(in), OCL_ARG(largest)};
    size_t gsz = (size_t)(outer * inner * D);
    return ocl_launch(k, kern, 10, args, 1, &gsz, NULL);
}

/* ---- Det ---------------------------------------------------------------------------------------------------- */

static wf_status *k_det(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input must have square matrices [..., M, M], got %s",
                                   ocl_nnr_tstr(x, b));
    int64_t m = x->dims[x->rank - 1];
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank - 2, x->dims, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, "det", &kern))) return s;
    cl_mem a;
    size_t dbl = ocl_of(k)->fp64 ? sizeof(cl_double) : sizeof(cl_float);
    if ((s = ocl_norm_scratch(k, (size_t)x->size * dbl, &a))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), mu = (cl_ulong)m;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(a), OCL_ARG(mu)};
    size_t gsz = (size_t)y->size;
    s = ocl_launch(k, kern, 6, args, 1, &gsz, NULL);
    clReleaseMemObject(a); /* the queued kernel keeps it alive until it finishes */
    return s;
}

/* ---- LpPool ------------------------------------------------------------------------------------------------- */

static wf_status *k_lppool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    const wf__attr *ks = ocl_host->attr_get(k->op, k->attrs, "kernel_shape"),
                   *st = ocl_host->attr_get(k->op, k->attrs, "strides"),
                   *dl = ocl_host->attr_get(k->op, k->attrs, "dilations"),
                   *pd = ocl_host->attr_get(k->op, k->attrs, "pads");
    bool ceil_mode = ocl_host->attr_get(k->op, k->attrs, "ceil_mode")->i != 0;
    char err[480];
    wf__ku_pool_plan L;
    if (!wf__ku_lppool_plan(x->rank, x->dims, ocl_nnr_tstr(x, b), ks, st, dl, pd,
                            ocl_host->attr_get(k->op, k->attrs, "auto_pad")->s, ceil_mode, &L, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    int ns = L.ns;
    cl_long8 in, out, kk, ss, dd, pb, is;
    memset(&in, 0, sizeof in);
    out = kk = ss = dd = pb = is = in;
    int64_t yd[WF_MAX_RANK] = {x->dims[0], x->dims[1]}, in_plane = L.in_plane, out_plane = L.out_plane, win = L.win;
    for (int i = 0; i < ns; i++) {
        in.s[i] = L.in[i], out.s[i] = L.out[i], kk.s[i] = L.k[i], ss.s[i] = L.s[i], dd.s[i] = L.d[i], pb.s[i] = L.pb[i];
        yd[i + 2] = L.out[i];
    }
    int64_t acc = 1;
    for (int i = ns - 1; i >= 0; i--) {
        is.s[i] = acc;
        acc *= x->dims[i + 2];
    }
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, yd, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, "lppool", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), ip = (cl_ulong)in_plane, op = (cl_ulong)out_plane, w = (cl_ulong)win;
    cl_int nsi = ns;
    ocl_nnr_dbl p = ocl_nnr_dbl_of(k, (double)ocl_host->attr_get(k->op, k->attrs, "p")->i);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(nsi), OCL_ARG(in),
                      OCL_ARG(out), OCL_ARG(kk), OCL_ARG(ss), OCL_ARG(dd), OCL_ARG(pb), OCL_ARG(is),
                      OCL_ARG(ip), OCL_ARG(op), OCL_ARG(w), OCL_DBL(p)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, NULL);
}

/* ---- the table ---------------------------------------------------------------------------------------------- */

const wf__kernel_def ocl_kernels_norm[] = {
    {"ReduceL1", "OPENCL", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"ReduceSumSquare", "OPENCL", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"ReduceLogSum", "OPENCL", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"ReduceLogSumExp", "OPENCL", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    /* the other dtypes are ocl_reduce.c's: the backend takes the first def whose key dtype fits */
    {"ReduceMin", "OPENCL", WF__DT_BIT(WF_BOOL), 0, k_reduce, NULL, 0},
    {"ReduceMax", "OPENCL", WF__DT_BIT(WF_BOOL), 0, k_reduce, NULL, 0},
    {"GlobalMaxPool", "OPENCL", WF__DT_FLOATS, 0, k_global_max_pool, NULL, 0},
    {"LpPool", "OPENCL", WF__DT_FLOATS, 0, k_lppool, NULL, 0},
    {"Hardmax", "OPENCL", WF__DT_FLOATS, 0, k_line, NULL, 0},
    {"LpNormalization", "OPENCL", WF__DT_FLOATS, 0, k_line, NULL, 0},
    {"TopK", "OPENCL", WF__DT_NUMERIC, 0, k_topk, NULL, 0},
    {"Det", "OPENCL", WF__DT_FLOATS, 0, k_det, NULL, 0},
    {"GroupNormalization", "OPENCL", WF__DT_FLOATS, 0, ocl_norm_k_groupnorm, NULL, 0},
    {"InstanceNormalization", "OPENCL", WF__DT_FLOATS, 0, ocl_norm_k_groupnorm, NULL, 0},
    {"RMSNormalization", "OPENCL", WF__DT_FLOATS, 0, ocl_norm_k_rmsnorm, NULL, 0},
    {"MeanVarianceNormalization", "OPENCL", WF__DT_FLOATS, 0, ocl_norm_k_mvn, NULL, 0},
    {"LRN", "OPENCL", WF__DT_FLOATS, 0, ocl_norm_k_lrn, NULL, 0},
    {"NegativeLogLikelihoodLoss", "OPENCL", WF__DT_FLOATS, 0, ocl_norm_k_loss, NULL, 0},
    {"SoftmaxCrossEntropyLoss", "OPENCL", WF__DT_FLOATS, 0, ocl_norm_k_loss, NULL, 0},
    {NULL},
};
