/*
 * OpenCL kernels of the recurrent ops (RNN, GRU, LSTM: the time loop runs on the host, each step is one
 * launch over direction x batch x hidden unit) and of ONNX Attention (one work item per query row).
 * Semantics and rounding follow src/backends/cpu/k_rnn.c and k_onnx_attn.c.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "backends/opencl/ocl_seq.h"
#include "ops/kutil_attn.h"
#include "ops/kutil_rnn.h"

/* ---- kernel source (one program per float dtype: -DDT=<wf_dtype>) -------------------------------------- */

static const char *g_seq2_src =
    OCLEW_PRELUDE
    "#ifdef HAS_FP64\n#define ACC double\n#else\n#define ACC float\n#endif\n"
    "#if DT == 3\n"
    "#define CPY(y, i, x, j) (((__global ushort *)(y))[i] = ((__global const ushort *)(x))[j])\n"
    "#else\n"
    "#define CPY(y, i, x, j) ((y)[i] = (x)[j])\n"
    "#endif\n"
    /* ---- RNN, GRU, LSTM ---- */
    "typedef struct {\n"
    "  long seq, batch, in, hs, nd, step;\n"
    "  int kind, layout, lbr, input_forget, reverse, has_b, has_p, has_lens, has_h0, has_c0, phase, has_yc;\n"
    "  float clip;\n"
    "  int ak[6];\n"
    "  float aa[6], ab[6];\n"
    "} rnn_t;\n"
    "ACC act(int kind, ACC al, ACC be, ACC x) {\n"
    "  switch (kind) {\n"
    "  case 0: return x < 0 ? 0 : x;\n" /* NaN stays NaN */
    "  case 1: return tanh(x);\n"
    "  case 2: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));\n"
    "  case 3: return al * x + be;\n"
    "  case 4: return x >= 0 ? x : al * x;\n"
    "  case 5: return x > al ? x : 0;\n"
    "  case 6: return al * tanh(be * x);\n"
    "  case 7: { ACC v = al * x + be; return v < 0 ? 0 : v > 1 ? 1 : v; }\n"
    "  case 8: return x >= 0 ? x : al * (exp(x) - 1);\n"
    "  case 9: return x / (1 + fabs(x));\n"
    "  default: return x > 30 ? x : log1p(exp(x));\n"
    "  }\n"
    "}\n"
    "ACC fa(const rnn_t *m, int a, ACC v) {\n"
    "  if (m->clip > 0) v = v < -(ACC)m->clip ? -(ACC)m->clip : v > (ACC)m->clip ? (ACC)m->clip : v;\n"
    "  return act(m->ak[a], m->aa[a], m->ab[a], v);\n"
    "}\n"
    "#define X_AT(t, b) ((m.layout ? (b) * m.seq + (t) : (t) * m.batch + (b)) * m.in)\n"
    "#define Y_AT(t, d, b) ((m.layout ? ((b) * m.seq + (t)) * m.nd + (d) : ((t) * m.nd + (d)) * m.batch + (b)) * m.hs)\n"
    "#define H_AT(d, b) ((m.layout ? (b) * m.nd + (d) : (d) * m.batch + (b)) * m.hs)\n"
    "__kernel void k_rnn_init(rnn_t m, __global const ST *h0, ulong h0o, __global const ST *c0, ulong c0o,\n"
    "                         __global ACC *hs, __global ACC *cs) {\n"
    "  long j = get_global_id(0), b = get_global_id(1), d = get_global_id(2), si = (d * m.batch + b) * m.hs + j;\n"
    "  hs[si] = m.has_h0 ? (ACC)LD(h0, h0o + H_AT(d, b) + j) : 0;\n"
    "  cs[si] = m.has_c0 ? (ACC)LD(c0, c0o + H_AT(d, b) + j) : 0;\n"
    "}\n"
    "__kernel void k_rnn_step(rnn_t m, __global const ST *x, ulong xo, __global const ST *w, ulong wo,\n"
    "                         __global const ST *r, ulong ro, __global const ST *bb, ulong bo, __global const ST *p,\n"
    "                         ulong po, __global const uchar *lens, ulong lo, __global const ACC *hp,\n"
    "                         __global ACC *hn, __global ACC *cs, __global ACC *rh, __global ST *y, ulong yo) {\n"
    "  long j = get_global_id(0), b = get_global_id(1), d = get_global_id(2);\n"
    "  long H = m.hs, G = m.kind, I = m.in, si = (d * m.batch + b) * H;\n"
    /* has_lens: 1 i32, 2 i64 lengths, checked on the device before (a bad one fails the run): clamped here */
    "  long len = m.has_lens == 1 ? (long)((__global const int *)lens)[lo + b]\n"
    "           : m.has_lens == 2 ? ((__global const long *)lens)[lo + b] : m.seq;\n"
    "  len = len < 0 ? 0 : len > m.seq ? m.seq : len;\n"
    "  if (m.step >= len) { if (m.phase != 1) hn[si + j] = hp[si + j]; return; }\n"
    "  bool rev = m.nd == 2 ? d == 1 : m.reverse;\n"
    "  long t = rev ? len - 1 - m.step : m.step;\n"
    "  __global const ST *xt = x + xo + X_AT(t, b), *W = w + wo + d * G * H * I, *R = r + ro + d * G * H * H;\n"
    "  __global const ST *Wb = bb + bo + d * 2 * G * H, *Rb = Wb + G * H;\n"
    "  __global const ACC *h = hp + si;\n"
    "  int A = (int)d * (G == 1 ? 1 : G == 3 ? 2 : 3);\n"
    "  ACC xw[4], hr[4];\n"
    "  for (long g = 0; g < G; g++) {\n"
    "    ACC a = m.has_b ? (ACC)LD(Wb, g * H + j) : 0, e = m.has_b ? (ACC)LD(Rb, g * H + j) : 0;\n"
    "    __global const ST *wr = W + (g * H + j) * I, *rr = R + (g * H + j) * H;\n"
    "    for (long i = 0; i < I; i++) a += (ACC)LD(xt, i) * (ACC)LD(wr, i);\n"
    /* GRU's hidden gate without linear_before_reset multiplies h by r first (phase 1) */
    "    if (!(G == 3 && !m.lbr && g == 2))\n"
    "      for (long i = 0; i < H; i++) e += h[i] * (ACC)LD(rr, i);\n"
    "    xw[g] = a;\n"
    "    hr[g] = e;\n"
    "  }\n"
    "  ACC nh;\n"
    "  if (G == 1) {\n"
    "    nh = fa(&m, A, xw[0] + hr[0]);\n"
    "  } else if (G == 3) {\n"
    "    ACC rg = fa(&m, A, xw[1] + hr[1]);\n"
    "    if (m.phase == 1) { rh[si + j] = rg * h[j]; return; }\n"
    "    ACC z = fa(&m, A, xw[0] + hr[0]), eh;\n"
    "    if (!m.lbr) {\n"
    "      __global const ST *rr = R + (2 * H + j) * H;\n"
    "      eh = m.has_b ? (ACC)LD(Rb, 2 * H + j) : 0;\n"
    "      for (long i = 0; i < H; i++) eh += rh[si + i] * (ACC)LD(rr, i);\n"
    "    } else {\n"
    "      eh = hr[2] * rg;\n"
    "    }\n"
    "    ACC hh = fa(&m, A + 1, xw[2] + eh);\n"
    "    nh = (1 - z) * hh + z * h[j];\n"
    "  } else {\n"
    "    __global const ST *P = p + po + d * 3 * H;\n"
    "    ACC c = cs[si + j];\n"
    "    ACC gi = fa(&m, A, xw[0] + hr[0] + (m.has_p ? (ACC)LD(P, j) * c : 0));\n"
    "    ACC gf = m.input_forget ? 1 - gi : fa(&m, A, xw[2] + hr[2] + (m.has_p ? (ACC)LD(P, 2 * H + j) * c : 0));\n"
    "    ACC gc = fa(&m, A + 1, xw[3] + hr[3]);\n"
    "    c = gf * c + gi * gc;\n"
    "    ACC go = fa(&m, A, xw[1] + hr[1] + (m.has_p ? (ACC)LD(P, H + j) * c : 0));\n"
    "    nh = go * fa(&m, A + 2, c);\n"
    "    cs[si + j] = c;\n"
    "  }\n"
    "  hn[si + j] = nh;\n"
    "  STO(y, yo + Y_AT(t, d, b) + j, (CT)nh);\n"
    "}\n"
    "__kernel void k_rnn_fin(rnn_t m, __global const ACC *hs, __global const ACC *cs, __global ST *yh, ulong yho,\n"
    "                        __global ST *yc, ulong yco) {\n"
    "  long j = get_global_id(0), b = get_global_id(1), d = get_global_id(2), si = (d * m.batch + b) * m.hs + j;\n"
    "  STO(yh, yho + H_AT(d, b) + j, (CT)hs[si]);\n"
    "  if (m.has_yc) STO(yc, yco + H_AT(d, b) + j, (CT)cs[si]);\n"
    "}\n"
    /* ---- Attention ---- */
    /* v rounded to float dtype t through f32, as the CPU's reference rounding does */
    "float rnd_h(float f) {\n"
    "  float a = fabs(f);\n"
    "  if (isnan(f)) return f;\n"
    "  if (a >= 65520.0f) return copysign(INFINITY, f);\n"
    "  if (a < 6.103515625e-05f) return copysign(rint(a * 16777216.0f) / 16777216.0f, f);\n"
    "  uint u = as_uint(f);\n"
    "  return as_float((u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu);\n"
    "}\n"
    "ACC rnd(ACC v, int t) {\n"
    "  if (t == 1) return (ACC)(float)v;\n"
    "  if (t == 3) return (ACC)rnd_h((float)v);\n"
    "  if (t == 4) return (ACC)bf_ld(bf_st((float)v));\n"
    "  return v;\n"
    "}\n"
    "ACC ld_any(__global const uchar *p, ulong i, int t) {\n"
    "  switch (t) {\n"
    "  case 1: return ((__global const float *)p)[i];\n"
    "#ifdef HAS_FP64\n"
    "  case 2: return ((__global const double *)p)[i];\n"
    "#endif\n"
    "  case 3: return vload_half(i, (__global const half *)p);\n"
    "  case 4: return bf_ld(((__global const ushort *)p)[i]);\n"
    "  case 8: return ((__global const int *)p)[i];\n"
    "  case 9: return ((__global const long *)p)[i];\n"
    "  default: return p[i];\n"
    "  }\n"
    "}\n"
    "__kernel void k_attn_cache(__global const ST *past, ulong po, __global const ST *cur, ulong co, __global ST *out,\n"
    "                           ulong oo, long P, long T, long H, long D, long bs, long hs, long ss) {\n"
    "  ulong n = get_global_id(0);\n"
    "  long d = n % D, s = (n / D) % T, h = (n / (D * T)) % H, b = n / (D * T * H);\n"
    "  if (s < P) CPY(out, oo + n, past, po + ((b * H + h) * P + s) * D + d);\n"
    "  else CPY(out, oo + n, cur, co + b * bs + h * hs + (s - P) * ss + d);\n"
    "}\n"
    "typedef struct {\n"
    "  long B, Hq, Hkv, Sq, T, P, Dk, Dv, qbs, qhs, qss, ms[4], mlen, left, right;\n"
    "  int causal, mode, sp, mask_t, has_mask, has_np, q4, replace;\n"
    "} attn_t;\n"
    "ACC attn_bias(const attn_t *j, __global const uchar *mp, ulong mo, __global const uchar *np, ulong npo, long b,\n"
    "              long h, long i, long kj) {\n"
    "  ACC v = 0;\n"
    "  if (j->has_mask) {\n"
    "    if (kj >= j->mlen) return -INFINITY;\n"
    "    long off = b * j->ms[0] + h * j->ms[1] + i * j->ms[2] + kj * j->ms[3];\n"
    "    if (j->mask_t == 10) { if (!mp[mo + off]) return -INFINITY; }\n"
    "    else v = ld_any(mp, mo + off, j->mask_t);\n"
    "  }\n"
    /* has_np: 1 i32, 2 i64 lengths, read from device memory (used as they are, as the CPU does) */
    "  long nonpad = j->has_np == 1 ? (long)((__global const int *)np)[npo + b]\n"
    "              : j->has_np == 2 ? ((__global const long *)np)[npo + b] : -1;\n"
    "  long offset = j->P > 0 ? j->P : (j->has_np ? nonpad - j->Sq : 0);\n"
    "  long diff = i + offset - kj;\n"
    "  if (j->causal && diff < 0) return -INFINITY;\n"
    "  if (j->left >= 0 && diff > j->left) return -INFINITY;\n"
    "  if (j->right >= 0 && -diff > j->right) return -INFINITY;\n"
    "  if (j->has_np && kj >= nonpad) return -INFINITY;\n"
    "  return v;\n"
    "}\n"
    "__kernel void k_attn_row(attn_t a, ACC scale, ACC softcap, __global const ST *q, ulong qo,\n"
    "                         __global const ST *pk, ulong pko, __global const ST *pv, ulong pvo,\n"
    "                         __global const uchar *mp, ulong mo, __global const uchar *np, ulong npo,\n"
    "                         __global ACC *xs,\n"
    "                         __global ST *qk, ulong qko, __global ST *y, ulong yo) {\n"
    "  long row = get_global_id(0);\n"
    "  long i = row % a.Sq, h = (row / a.Sq) % a.Hq, b = row / (a.Sq * a.Hq), hk = h / (a.Hq / a.Hkv);\n"
    "  int dt = DT, sp = a.sp;\n"
    "  ACC rs = rnd(sqrt(scale), dt);\n"
    "  __global const ST *qr = q + qo + b * a.qbs + h * a.qhs + i * a.qss;\n"
    "  __global const ST *kb = pk + pko + (b * a.Hkv + hk) * a.T * a.Dk, *vb = pv + pvo + (b * a.Hkv + hk) * a.T * a.Dv;\n"
    "  __global ACC *x = xs + row * a.T;\n"
    "  ulong qkr = qko + row * a.T;\n"
    "  ACC mx = -INFINITY, sum = 0;\n"
    "  bool open = false;\n"
    "  for (long kj = 0; kj < a.T; kj++) {\n"
    "    ACC acc = 0;\n"
    "    for (long d = 0; d < a.Dk; d++)\n"
    "      acc += rnd((ACC)LD(qr, d) * rs, dt) * rnd((ACC)LD(kb, kj * a.Dk + d) * rs, dt);\n"
    "    ACC s = rnd(acc, dt);\n"
    "    if (softcap > 0) s = rnd(rnd(tanh(rnd(s / softcap, dt)), dt) * softcap, dt);\n"
    "    ACC bias = attn_bias(&a, mp, mo, np, npo, b, h, i, kj);\n"
    "    open |= bias != -INFINITY;\n"
    "    ACC v = a.replace && bias == -INFINITY ? -INFINITY : rnd(s + bias, dt);\n"
    "    STO(qk, qkr + kj, (CT)(a.mode == 2 ? v : s));\n"
    "    ACC xv = rnd(v, sp);\n"
    "    x[kj] = xv;\n"
    "    if (isnan(xv) || xv > mx) mx = xv;\n"
    "  }\n"
    "  bool dead = !open; /* scores all -inf by themselves give NaN, as Softmax */\n"
    "  if (dead) {\n"
    "    if (a.mode == 3) for (long kj = 0; kj < a.T; kj++) STO(qk, qkr + kj, (CT)0);\n"
    "  } else {\n"
    "    for (long kj = 0; kj < a.T; kj++) {\n"
    "      x[kj] = rnd(exp(rnd(x[kj] - mx, sp)), sp);\n"
    "      sum = sp == 4 ? rnd(sum + x[kj], sp) : sum + x[kj];\n"
    "    }\n"
    "    sum = rnd(sum, sp);\n"
    "    if (sum == 0) sum = 1;\n"
    "    for (long kj = 0; kj < a.T; kj++) {\n"
    "      ACC pr = rnd(x[kj] / sum, sp);\n"
    "      if (a.mode == 3) STO(qk, qkr + kj, (CT)pr);\n"
    "      x[kj] = rnd(pr, dt);\n"
    "    }\n"
    "  }\n"
    "  for (long d = 0; d < a.Dv; d++) {\n"
    "    ACC acc = 0;\n"
    "    if (!dead) for (long kj = 0; kj < a.T; kj++) acc += x[kj] * (ACC)LD(vb, kj * a.Dv + d);\n"
    "    long o = a.q4 ? row * a.Dv + d : (b * a.Sq + i) * a.Hq * a.Dv + h * a.Dv + d;\n"
    "    STO(y, yo + o, (CT)acc);\n"
    "  }\n"
    "}\n";

static wf_status *seq2_kernel(wf__kctx *k, wf_dtype t, const char *name, cl_kernel *out)
{
    return oclew_kernel(k, "seq2", g_seq2_src, t, name, out);
}

static bool has_in(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

static int64_t attr_i(const wf__kctx *k, const char *name, int64_t dflt)
{
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, name);
    return a ? a->i : dflt;
}

/* ---- RNN, GRU, LSTM ----------------------------------------------------------------------------------- */

/* Matches rnn_t in the kernel source (longs, then 4-byte fields; 176 bytes on both sides). */
typedef struct rnn_t {
    cl_long seq, batch, in, hs, nd, step;
    cl_int kind, layout, lbr, input_forget, reverse, has_b, has_p, has_lens, has_h0, has_c0, phase, has_yc;
    cl_float clip;
    cl_int ak[6];
    cl_float aa[6], ab[6];
} rnn_t;

/* `activations` and their alpha/beta into m, read as src/ops/kutil_rnn.h describes. */
static wf_status *parse_acts(wf__kctx *k, int per_dir, int nd, const char *const *defaults, rnn_t *m)
{
    const wf__attr *sa = ocl_host->attr_get(k->op, k->attrs, "activations");
    int kind[WF__KU_MAX_ACTS];
    double al[WF__KU_MAX_ACTS], be[WF__KU_MAX_ACTS];
    char err[256];
    if (!wf__ku_rnn_acts(sa ? sa->s : NULL, ocl_host->attr_get(k->op, k->attrs, "activation_alpha"),
                         ocl_host->attr_get(k->op, k->attrs, "activation_beta"), per_dir, nd, defaults, k->op->name, kind,
                         al, be, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    for (int i = 0; i < per_dir * nd; i++) {
        m->ak[i] = kind[i];
        m->aa[i] = (cl_float)al[i];
        m->ab[i] = (cl_float)be[i];
    }
    return NULL;
}

static wf_status *rnn_check(wf__kctx *k, int idx, const char *what, int rank, const int64_t *want)
{
    const wf_tensor *t = k->in[idx];
    bool ok = t->rank == rank && t->dtype == k->in[0]->dtype;
    for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == want[i];
    if (ok) return NULL;
    char b[96];
    int len = 0;
    for (int i = 0; i < rank && len < 80; i++) len += snprintf(b + len, sizeof b - (size_t)len, i ? ", %lld" : "%lld",
                                                              (long long)want[i]);
    return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s must be (%s) of X's dtype", what, b);
}

wf_status *oclseq_k_rnn(wf__kctx *k)
{
    static const char *const d_rnn[] = {"Tanh"}, *const d_gru[] = {"Sigmoid", "Tanh"},
                             *const d_lstm[] = {"Sigmoid", "Tanh", "Tanh"};
    const wf_tensor *X = k->in[0], *W = k->in[1], *R = k->in[2];
    rnn_t m;
    memset(&m, 0, sizeof m);
    m.kind = !strcmp(k->op->name, "LSTM") ? 4 : !strcmp(k->op->name, "GRU") ? 3 : 1;
    m.layout = (cl_int)attr_i(k, "layout", 0);
    const wf__attr *da = ocl_host->attr_get(k->op, k->attrs, "direction");
    const char *dir = da && da->s ? da->s : "forward";
    m.nd = !strcmp(dir, "bidirectional") ? 2 : 1;
    m.reverse = !strcmp(dir, "reverse");
    if (X->rank != 3 || W->rank != 3 || R->rank != 3 || W->dims[0] != m.nd || R->dims[2] <= 0 ||
        W->dims[1] != m.kind * R->dims[2] || W->dims[2] != X->dims[2] || W->dtype != X->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X and W do not fit a %s with direction '%s'", k->op->name,
                                   dir);
    m.seq = X->dims[m.layout ? 1 : 0];
    m.batch = X->dims[m.layout ? 0 : 1];
    m.in = X->dims[2];
    m.hs = R->dims[2];
    const wf__attr *hsa = ocl_host->attr_get(k->op, k->attrs, "hidden_size");
    if (hsa && hsa->set && hsa->i != m.hs)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "hidden_size %" PRId64 " does not match R's %lld", hsa->i,
                                   (long long)m.hs);
    int64_t G = m.kind, H = m.hs, nd = m.nd, B = m.batch;
    int64_t rw[3] = {nd, G * H, H}, bw[2] = {nd, 2 * G * H}, pw[2] = {nd, 3 * H};
    int64_t hw[3] = {nd, B, H}, hwl[3] = {B, nd, H};
    wf_status *s;
    if ((s = rnn_check(k, 2, "R", 3, rw))) return s;
    if (has_in(k, 3) && (s = rnn_check(k, 3, "B", 2, bw))) return s;
    if (has_in(k, 5) && (s = rnn_check(k, 5, "initial_h", 3, m.layout ? hwl : hw))) return s;
    if (G == 4 && has_in(k, 6) && (s = rnn_check(k, 6, "initial_c", 3, m.layout ? hwl : hw))) return s;
    if (G == 4 && has_in(k, 7) && (s = rnn_check(k, 7, "P", 2, pw))) return s;
    const wf__attr *clip = ocl_host->attr_get(k->op, k->attrs, "clip");
    m.clip = clip && clip->set ? (cl_float)clip->f : 0;
    if (G == 3) m.lbr = attr_i(k, "linear_before_reset", 0) != 0;
    if (G == 4) m.input_forget = attr_i(k, "input_forget", 0) != 0;
    if ((s = parse_acts(k, G == 1 ? 1 : G == 3 ? 2 : 3, (int)nd, G == 1 ? d_rnn : G == 3 ? d_gru : d_lstm, &m)))
        return s;
    /* sequence_lens: checked on the device (ocl_check_ints: a bad one fails the run, in the CPU's words);
     * the steps read them from device memory and clamp them */
    const wf_tensor *L = has_in(k, 4) ? k->in[4] : NULL;
    if (L) {
        if ((L->dtype != WF_I32 && L->dtype != WF_I64) || L->rank != 1 || L->dims[0] != B)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "sequence_lens must be i32 or i64 of shape (%lld)",
                                       (long long)B);
        if ((s = ocl_check_ints(k, L, OCL_SITE_RNN_LENS, 0, m.seq, false, NULL, m.seq, ""))) return s;
        m.has_lens = L->dtype == WF_I32 ? 1 : 2;
    }
    m.has_b = has_in(k, 3);
    m.has_h0 = has_in(k, 5);
    m.has_c0 = G == 4 && has_in(k, 6);
    m.has_p = G == 4 && has_in(k, 7);
    wf_dtype t = X->dtype;
    int64_t ydims[4] = {m.seq, nd, B, H}, ydl[4] = {B, m.seq, nd, H};
    wf_tensor *y, *yh = NULL, *yc = NULL;
    cl_mem bufs[4] = {0}; /* h ping, h pong, c, r*h */
    size_t acc = ocl_of(k)->fp64 ? sizeof(cl_double) : sizeof(cl_float), nstate = (size_t)(nd * B * H);
    cl_kernel ki, ks, kf;
    if (s || (s = ocl_host->kctx_output(k, 0, t, 4, m.layout ? ydl : ydims, &y))) goto done;
    if (k->n_out > 1 && (s = ocl_host->kctx_output(k, 1, t, 3, m.layout ? hwl : hw, &yh))) goto done;
    if (G == 4 && k->n_out > 2 && (s = ocl_host->kctx_output(k, 2, t, 3, m.layout ? hwl : hw, &yc))) goto done;
    m.has_yc = yc != NULL;
    size_t es = ocl_size(t);
    if (y->size) {
        /* steps past a batch entry's length leave zeros */
        cl_uchar zero[8] = {0};
        cl_int st = clEnqueueFillBuffer(ocl_of(k)->q, ocl_mem(y), zero, es, y->dev_offset, (size_t)y->size * es, 0,
                                        NULL, NULL);
        if (st != CL_SUCCESS) {
            s = ocl_fail(k, st, "zero fill of Y");
            goto done;
        }
    }
    if (nstate == 0) goto done;
    for (int i = 0; i < 4 && !s; i++) s = oclseq_buf(k, nstate * acc, NULL, &bufs[i]);
    if (!s) s = seq2_kernel(k, t, "rnn_init", &ki);
    if (!s) s = seq2_kernel(k, t, "rnn_step", &ks);
    if (!s) s = seq2_kernel(k, t, "rnn_fin", &kf);
    if (s) goto done;
    size_t g[3] = {(size_t)H, (size_t)B, (size_t)nd};
    /* absent optional inputs are replaced by X, which the kernels then never read */
    const wf_tensor *o[4] = {m.has_b ? k->in[3] : X, m.has_h0 ? k->in[5] : X, m.has_c0 ? k->in[6] : X,
                             m.has_p ? k->in[7] : X};
    cl_mem h0m = ocl_mem(o[1]), c0m = ocl_mem(o[2]);
    cl_ulong h0o = ocl_off(o[1]), c0o = ocl_off(o[2]);
    {
        ocl_arg a[] = {OCL_ARG(m), OCL_ARG(h0m), OCL_ARG(h0o), OCL_ARG(c0m), OCL_ARG(c0o), OCL_ARG(bufs[0]),
                       OCL_ARG(bufs[2])};
        if ((s = ocl_launch(k, ki, 7, a, 3, g, NULL))) goto done;
    }
    cl_mem xm = ocl_mem(X), wm = ocl_mem(W), rm = ocl_mem(R), bm = ocl_mem(o[0]), pm = ocl_mem(o[3]), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(X), wo = ocl_off(W), ro = ocl_off(R), bo = ocl_off(o[0]), po = ocl_off(o[3]), yo = ocl_off(y);
    cl_mem lm = ocl_mem(L ? L : X);
    cl_ulong lo = L ? ocl_off(L) : 0;
    int cur = 0;
    for (int64_t step = 0; step < m.seq && !s; step++) {
        m.step = step;
        for (int phase = (G == 3 && !m.lbr) ? 1 : 2; phase <= 2 && !s; phase++) {
            m.phase = phase;
            ocl_arg a[] = {OCL_ARG(m),         OCL_ARG(xm),       OCL_ARG(xo),      OCL_ARG(wm),      OCL_ARG(wo),
                           OCL_ARG(rm),        OCL_ARG(ro),       OCL_ARG(bm),      OCL_ARG(bo),      OCL_ARG(pm),
                           OCL_ARG(po),        OCL_ARG(lm),       OCL_ARG(lo),      OCL_ARG(bufs[cur]),
                           OCL_ARG(bufs[1 - cur]), OCL_ARG(bufs[2]), OCL_ARG(bufs[3]), OCL_ARG(ym), OCL_ARG(yo)};
            s = ocl_launch(k, ks, 19, a, 3, g, NULL);
        }
        cur = 1 - cur;
    }
    if (!s && yh) {
        cl_mem yhm = ocl_mem(yh), ycm = yc ? ocl_mem(yc) : ocl_mem(yh);
        cl_ulong yho = ocl_off(yh), yco = yc ? ocl_off(yc) : 0;
        ocl_arg a[] = {OCL_ARG(m), OCL_ARG(bufs[cur]), OCL_ARG(bufs[2]), OCL_ARG(yhm), OCL_ARG(yho), OCL_ARG(ycm),
                       OCL_ARG(yco)};
        s = ocl_launch(k, kf, 7, a, 3, g, NULL);
    }
done:
    for (int i = 0; i < 4; i++)
        if (bufs[i]) clReleaseMemObject(bufs[i]);
    return s;
}

/* ---- Attention ---------------------------------------------------------------------------------------- */

/* Matches attn_t in the kernel source. */
typedef struct attn_t {
    cl_long B, Hq, Hkv, Sq, T, P, Dk, Dv, qbs, qhs, qss, ms[4], mlen, left, right;
    cl_int causal, mode, sp, mask_t, has_mask, has_np, q4, replace; /* replace: mask_replaces */
} attn_t;

static wf_status *view_of(wf__kctx *k, const wf_tensor *t, int64_t heads, const char *what, wf__ku_attn_view *v)
{
    if (!wf__ku_attn_view_of(t->rank, t->dims, heads, v))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "%s must be 4-D, or 3-D with a hidden size that %" PRId64 " heads divide", what,
                                   heads);
    return NULL;
}

static wf_status *attn_cache(wf__kctx *k, const wf_tensor *past, const wf_tensor *cur, const wf__ku_attn_view *v, int64_t P,
                             wf_tensor *out)
{
    if (!out->size) return NULL;
    cl_kernel kern;
    wf_status *s = seq2_kernel(k, out->dtype, "attn_cache", &kern);
    if (s) return s;
    const wf_tensor *pt = past ? past : cur;
    cl_mem pm = ocl_mem(pt), cm = ocl_mem(cur), om = ocl_mem(out);
    cl_ulong po = ocl_off(pt), co = ocl_off(cur), oo = ocl_off(out);
    cl_long Pl = P, T = P + v->S, H = v->H, D = v->D, bs = v->bs, hs = v->hs, ss = v->ss;
    ocl_arg a[] = {OCL_ARG(pm), OCL_ARG(po), OCL_ARG(cm), OCL_ARG(co), OCL_ARG(om), OCL_ARG(oo), OCL_ARG(Pl),
                   OCL_ARG(T),  OCL_ARG(H),  OCL_ARG(D),  OCL_ARG(bs), OCL_ARG(hs), OCL_ARG(ss)};
    size_t g = (size_t)out->size;
    return ocl_launch(k, kern, 13, a, 1, &g, NULL);
}

wf_status *oclseq_k_attention(wf__kctx *k)
{
    const wf_tensor *Q = k->in[0], *K = k->in[1], *V = k->in[2];
    const wf_tensor *mask = has_in(k, 3) ? k->in[3] : NULL, *pk = has_in(k, 4) ? k->in[4] : NULL,
                    *pv = has_in(k, 5) ? k->in[5] : NULL, *np = has_in(k, 6) ? k->in[6] : NULL;
    wf__ku_attn_view vq, vk, vv;
    wf_status *s;
    if ((s = view_of(k, Q, attr_i(k, "q_num_heads", 0), "Q", &vq)) ||
        (s = view_of(k, K, attr_i(k, "kv_num_heads", 0), "K", &vk)) ||
        (s = view_of(k, V, attr_i(k, "kv_num_heads", 0), "V", &vv)))
        return s;
    if (!wf__ku_attn_fit(Q->rank, K->rank, V->rank, &vq, &vk, &vv) || K->dtype != Q->dtype || V->dtype != Q->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "Q, K and V do not fit (batch, heads, head sizes, dtype)");
    attn_t a;
    memset(&a, 0, sizeof a);
    a.B = vq.B, a.Hq = vq.H, a.Hkv = vk.H, a.Sq = vq.S, a.Dk = vk.D, a.Dv = vv.D;
    a.qbs = vq.bs, a.qhs = vq.hs, a.qss = vq.ss, a.q4 = Q->rank == 4;
    a.causal = attr_i(k, "is_causal", 0) != 0;
    a.left = attr_i(k, "left_window_size", -1);
    a.right = attr_i(k, "right_window_size", -1);
    a.mode = (cl_int)attr_i(k, "qk_matmul_output_mode", 0);
    a.replace = attr_i(k, "mask_replaces", 0) != 0;
    wf_dtype dt = Q->dtype, sp = (wf_dtype)attr_i(k, "softmax_precision", WF_DTYPE_INVALID);
    if (sp == WF_DTYPE_INVALID) sp = dt;
    if (!oclew_is_float(sp))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "softmax_precision %s must be a float dtype",
                                   oclew_dtype_name(sp));
    a.sp = sp;
    if ((pk != NULL) != (pv != NULL)) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "past_key needs past_value");
    int64_t Skv = vk.S;
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != a.B || pk->dims[1] != a.Hkv || pk->dims[3] != a.Dk ||
            pv->dims[0] != a.B || pv->dims[1] != a.Hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != a.Dv ||
            pk->dtype != dt || pv->dtype != dt)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                       "past_key and past_value must be (%lld, %lld, past, head size)",
                                       (long long)a.B, (long long)a.Hkv);
        a.P = pk->dims[2];
    }
    a.T = a.P + Skv;
    cl_mem scratch = NULL;
    if (np) {
        if (np->rank != 1 || np->dims[0] != a.B || (np->dtype != WF_I32 && np->dtype != WF_I64))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "nonpad_kv_seqlen must have one length per batch (%lld)",
                                       (long long)a.B);
        a.has_np = np->dtype == WF_I32 ? 1 : 2;
    }
    if (mask) {
        /* right-aligned broadcast onto (B, Hq, Sq, T); a key dim shorter than T is padded with -inf */
        int r = mask->rank;
        bool ok = wf__ku_attn_mask_strides(r, mask->dims, a.B, a.Hq, a.Sq, a.T, a.ms);
        if (!ok)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                       "attn_mask does not broadcast to (%lld, %lld, %lld, <= %lld)", (long long)a.B,
                                       (long long)a.Hq, (long long)a.Sq, (long long)a.T);
        a.mlen = mask->dims[r - 1];
        a.has_mask = 1;
        a.mask_t = mask->dtype;
        if (mask->dtype != WF_BOOL && !oclew_is_float(mask->dtype))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "attn_mask must be bool or a float dtype, not %s",
                                       oclew_dtype_name(mask->dtype));
    }
    const wf__attr *sca = ocl_host->attr_get(k->op, k->attrs, "scale");
    const wf__attr *sc = ocl_host->attr_get(k->op, k->attrs, "softcap");
    double scale = sca && sca->set ? sca->f : 1.0 / sqrt((double)a.Dk), softcap = sc ? sc->f : 0;
    wf_tensor *y, *opk, *opv, *oqk;
    int64_t yd[4], pkd[4], pvd[4], qkd[4];
    wf__ku_attn_out_dims(Q->rank, a.B, a.Hq, a.Hkv, a.Sq, a.T, a.Dk, a.Dv, yd, pkd, pvd, qkd);
    if ((s = ocl_host->kctx_output(k, 0, dt, Q->rank, yd, &y)) || (s = ocl_host->kctx_output(k, 1, dt, 4, pkd, &opk)) ||
        (s = ocl_host->kctx_output(k, 2, dt, 4, pvd, &opv)) || (s = ocl_host->kctx_output(k, 3, dt, 4, qkd, &oqk)))
        return s;
    if ((s = attn_cache(k, pk, K, &vk, a.P, opk)) || (s = attn_cache(k, pv, V, &vv, a.P, opv))) return s;
    size_t nq = (size_t)(a.B * a.Hq * a.Sq);
    if (nq == 0) return NULL;
    bool f64 = ocl_of(k)->fp64;
    cl_kernel kern;
    if (!(s = oclseq_buf(k, nq * (size_t)(a.T ? a.T : 1) * (f64 ? 8 : 4), NULL, &scratch)) &&
        !(s = seq2_kernel(k, dt, "attn_row", &kern))) {
        cl_double sd = scale, cd = softcap;
        cl_float sf = (cl_float)scale, cf = (cl_float)softcap;
        cl_mem qm = ocl_mem(Q), pkm = ocl_mem(opk), pvm = ocl_mem(opv), mm = mask ? ocl_mem(mask) : ocl_mem(Q);
        cl_mem nm = np ? ocl_mem(np) : scratch, qkm = ocl_mem(oqk), ym = ocl_mem(y);
        cl_ulong npo = np ? ocl_off(np) : 0;
        cl_ulong qo = ocl_off(Q), pko = ocl_off(opk), pvo = ocl_off(opv), mo = mask ? ocl_off(mask) : 0;
        cl_ulong qko = ocl_off(oqk), yo = ocl_off(y);
        ocl_arg args[] = {OCL_ARG(a),       f64 ? OCL_ARG(sd) : OCL_ARG(sf), f64 ? OCL_ARG(cd) : OCL_ARG(cf),
                          OCL_ARG(qm),      OCL_ARG(qo),  OCL_ARG(pkm), OCL_ARG(pko), OCL_ARG(pvm),
                          OCL_ARG(pvo),     OCL_ARG(mm),  OCL_ARG(mo),  OCL_ARG(nm),  OCL_ARG(npo),
                          OCL_ARG(scratch), OCL_ARG(qkm), OCL_ARG(qko), OCL_ARG(ym),  OCL_ARG(yo)};
        s = ocl_launch(k, kern, 18, args, 1, &nq, NULL);
    }
    if (scratch) clReleaseMemObject(scratch);
    return s;
}
