/*
 * Host side of the CUDA sequence and quantisation ops: RNN, GRU, LSTM (the time loop runs here, one launch
 * per step), Attention, RotaryEmbedding, Quantize / Dequantize / DynamicQuantizeLinear, MatMulInteger,
 * QLinearMatMul, ConvInteger and QLinearConv, with the family's kernel table. Checks and shapes follow the
 * OpenCL port (src/backends/opencl/ocl_rnn_attn.c, ocl_quant_signal.c) of the CPU kernels
 * (src/backends/cpu/k_rnn.c, k_onnx_attn.c, k_onnx_quant.c); small per-tensor parameters are read back,
 * the rest is read on the device.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_seq.h"
#include "ops/kutil_attn.h"
#include "ops/kutil_half.h"
#include "ops/kutil_matmul.h"
#include "ops/kutil_quant.h"
#include "ops/kutil_rnn.h"

/* ---- helpers ------------------------------------------------------------------------------------------ */

static bool has_in(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

static int64_t attr_i(const wf__kctx *k, const char *name, int64_t dflt)
{
    const wf__attr *a = cu_host->attr_get(k->op, k->attrs, name);
    return a ? a->i : dflt;
}

static const wf__attr *attr(const wf__kctx *k, const char *name) { return cu_host->attr_get(k->op, k->attrs, name); }

static const char *attr_s(const wf__kctx *k, const char *name, const char *dflt)
{
    const wf__attr *a = attr(k, name);
    return a && a->s ? a->s : dflt;
}

/* Element 0 of a device tensor as a double. */
static wf_status *read_scalar(wf__kctx *k, const wf_tensor *t, double *v)
{
    uint64_t raw = 0;
    wf_status *s = cu_read(k, t, &raw, cu_size(t->dtype));
    if (!s) *v = wf__ku_load_f64(&raw, t->dtype, 0);
    return s;
}

static wf_status *read_scalar_int(wf__kctx *k, const wf_tensor *t, int64_t *v)
{
    uint64_t raw = 0;
    wf_status *s = cu_read(k, t, &raw, cu_size(t->dtype));
    if (!s) *v = cu_int_at(&raw, t->dtype, 0);
    return s;
}

/* Stream-ordered scratch on the compute stream: the free is queued behind the kernels that use it, so
 * the host never waits for them. */
static wf_status *scratch_alloc(wf__kctx *k, size_t bytes, void **p)
{
    *p = NULL;
    return cu_check(k, (int)cudaMallocAsync(p, bytes ? bytes : 8, cu_of(k)->compute), "scratch allocation");
}

static wf_status *scratch_free(wf__kctx *k, void *p, wf_status *s)
{
    if (p) cudaFreeAsync(p, cu_of(k)->compute);
    return s;
}

/* ---- RNN, GRU, LSTM ----------------------------------------------------------------------------------- */

static wf_status *rnn_check(wf__kctx *k, int idx, const char *what, int rank, const int64_t *want, bool same_dtype)
{
    const wf_tensor *t = k->in[idx];
    bool ok = t->rank == rank && (!same_dtype || t->dtype == k->in[0]->dtype);
    for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == want[i];
    if (ok) return NULL;
    char b0[160], b1[160];
    int len = 0;
    for (int i = 0; i < rank && len < 120; i++)
        len += snprintf(b1 + len, sizeof b1 - (size_t)len, i ? ", %lld" : "%lld", (long long)want[i]);
    return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be (%s)%s", what, cu_tstr(t, b0), b1,
                              same_dtype ? " of X's dtype" : "");
}

static wf_status *k_rnn(wf__kctx *k)
{
    static const char *const d_rnn[] = {"Tanh"}, *const d_gru[] = {"Sigmoid", "Tanh"},
                             *const d_lstm[] = {"Sigmoid", "Tanh", "Tanh"};
    const wf_tensor *X = k->in[0], *W = k->in[1], *R = k->in[2];
    char b0[160], b1[160];
    cuk_rnn m;
    memset(&m, 0, sizeof m);
    m.kind = !strcmp(k->op->name, "LSTM") ? 4 : !strcmp(k->op->name, "GRU") ? 3 : 1;
    m.layout = (int)attr_i(k, "layout", 0);
    const char *dir = attr_s(k, "direction", "forward");
    m.nd = !strcmp(dir, "bidirectional") ? 2 : 1;
    m.reverse = !strcmp(dir, "reverse");
    if (X->rank != 3 || W->rank != 3 || R->rank != 3 || W->dims[0] != m.nd || R->dims[2] <= 0 ||
        W->dims[1] != m.kind * R->dims[2] || W->dims[2] != X->dims[2] || W->dtype != X->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s and W %s do not fit a %s with direction '%s'",
                                  cu_tstr(X, b0), cu_tstr(W, b1), k->op->name, dir);
    m.seq = X->dims[m.layout ? 1 : 0];
    m.batch = X->dims[m.layout ? 0 : 1];
    m.in = X->dims[2];
    m.hs = R->dims[2];
    const wf__attr *hsa = attr(k, "hidden_size");
    if (hsa && hsa->set && hsa->i != m.hs)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "hidden_size %" PRId64 " does not match R %s", hsa->i,
                                  cu_tstr(R, b0));
    int64_t G = m.kind, H = m.hs, nd = m.nd, B = m.batch;
    int64_t rw[3] = {nd, G * H, H}, bw[2] = {nd, 2 * G * H}, pw[2] = {nd, 3 * H}, lw[1] = {B};
    int64_t hw[3] = {nd, B, H}, hwl[3] = {B, nd, H};
    wf_status *s;
    if ((s = rnn_check(k, 2, "R", 3, rw, true))) return s;
    if (has_in(k, 3) && (s = rnn_check(k, 3, "B", 2, bw, true))) return s;
    if (has_in(k, 4) && (s = rnn_check(k, 4, "sequence_lens", 1, lw, false))) return s;
    if (has_in(k, 5) && (s = rnn_check(k, 5, "initial_h", 3, m.layout ? hwl : hw, true))) return s;
    if (G == 4 && has_in(k, 6) && (s = rnn_check(k, 6, "initial_c", 3, m.layout ? hwl : hw, true))) return s;
    if (G == 4 && has_in(k, 7) && (s = rnn_check(k, 7, "P", 2, pw, true))) return s;
    const wf__attr *clip = attr(k, "clip");
    m.clip = clip && clip->set ? clip->f : 0;
    if (G == 3) m.lbr = attr_i(k, "linear_before_reset", 0) != 0;
    if (G == 4) m.input_forget = attr_i(k, "input_forget", 0) != 0;
    {
        int per_dir = G == 1 ? 1 : G == 3 ? 2 : 3, kind[WF__KU_MAX_ACTS];
        double al[WF__KU_MAX_ACTS], be[WF__KU_MAX_ACTS];
        char err[256];
        if (!wf__ku_rnn_acts(attr_s(k, "activations", NULL), attr(k, "activation_alpha"), attr(k, "activation_beta"),
                             per_dir, (int)nd, G == 1 ? d_rnn : G == 3 ? d_gru : d_lstm, k->op->name, kind, al, be, err,
                             sizeof err))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
        for (int i = 0; i < per_dir * nd; i++) m.ak[i] = kind[i], m.aa[i] = al[i], m.ab[i] = be[i];
    }
    if ((s = cu_enter(k))) return s;
    /* sequence_lens: checked by a kernel (a bad one fails the run, as on the CPU); the steps clamp them */
    const wf_tensor *L = has_in(k, 4) ? k->in[4] : NULL;
    if (L) {
        if (L->dtype != WF_I32 && L->dtype != WF_I64)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "sequence_lens must be i32 or i64, not %s",
                                      cu_dtype_name(L->dtype));
        cuk_err *err;
        unsigned long long site;
        if ((s = cu_err_site(k, CU_SITE_RNN_LENS, 0, L, X, &err, &site)) ||
            (s = cu_check(k, cuk_range_check(cu_of(k)->compute, cu_ptr(L), L->dtype == WF_I64, B, 0, m.seq + 1, m.seq,
                                             err, site),
                          "sequence_lens check")))
            return s;
        m.lens_dt = L->dtype;
    }
    wf_dtype t = X->dtype;
    int64_t ydims[4] = {m.seq, nd, B, H}, ydl[4] = {B, m.seq, nd, H};
    wf_tensor *y, *yh = NULL, *yc = NULL;
    if ((s = cu_host->kctx_output(k, 0, t, 4, m.layout ? ydl : ydims, &y))) return s;
    if (k->n_out > 1 && (s = cu_host->kctx_output(k, 1, t, 3, m.layout ? hwl : hw, &yh))) return s;
    if (G == 4 && k->n_out > 2 && (s = cu_host->kctx_output(k, 2, t, 3, m.layout ? hwl : hw, &yc))) return s;
    cudaStream_t st = cu_of(k)->compute;
    /* steps past a batch entry's length leave zeros */
    if (y->size && (s = cu_check(k, (int)cudaMemsetAsync(cu_ptr(y), 0, (size_t)y->size * cu_size(t), st), "zero fill of Y")))
        return s;
    int64_t nstate = nd * B * H;
    if (nstate == 0) return NULL;
    double *buf;
    if ((s = scratch_alloc(k, sizeof(double) * 4 * (size_t)nstate, (void **)&buf))) return s;
    double *hb[2] = {buf, buf + nstate}, *cb = buf + 2 * nstate, *rh = buf + 3 * nstate;
    const void *bp = has_in(k, 3) ? cu_ptr(k->in[3]) : NULL, *h0 = has_in(k, 5) ? cu_ptr(k->in[5]) : NULL;
    const void *c0 = G == 4 && has_in(k, 6) ? cu_ptr(k->in[6]) : NULL, *pp = G == 4 && has_in(k, 7) ? cu_ptr(k->in[7]) : NULL;
    const void *lp = L ? cu_ptr(L) : NULL;
    s = cu_check(k, cuk_rnn_init(st, t, &m, h0, c0, hb[0], cb), "recurrent state initialisation");
    int cur = 0;
    for (int64_t step = 0; step < m.seq && !s; step++) {
        m.step = step;
        for (int phase = (G == 3 && !m.lbr) ? 1 : 2; phase <= 2 && !s; phase++) {
            m.phase = phase;
            s = cu_check(k,
                         cuk_rnn_step(st, t, &m, cu_ptr(X), cu_ptr(W), cu_ptr(R), bp, pp, lp, hb[cur], hb[1 - cur], cb, rh,
                                      cu_ptr(y)),
                         "recurrent step");
        }
        cur = 1 - cur;
    }
    if (!s && (yh || yc))
        s = cu_check(k, cuk_rnn_fin(st, t, &m, hb[cur], cb, yh ? cu_ptr(yh) : NULL, yc ? cu_ptr(yc) : NULL),
                     "final state");
    return scratch_free(k, buf, s);
}

/* ---- Attention ---------------------------------------------------------------------------------------- */

#define CU_ATTN_SCRATCH ((int64_t)256 << 20) /* bytes of softmax scratch per launch */

static wf_status *view_of(wf__kctx *k, const wf_tensor *t, int64_t heads, const char *what, wf__ku_attn_view *v)
{
    char b[160];
    if (!wf__ku_attn_view_of(t->rank, t->dims, heads, v))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "%s %s must be 4-D, or 3-D with a hidden size that %" PRId64 " heads divide", what,
                                  cu_tstr(t, b), heads);
    return NULL;
}

static wf_status *k_attention(wf__kctx *k)
{
    const wf_tensor *Q = k->in[0], *K = k->in[1], *V = k->in[2];
    const wf_tensor *mask = has_in(k, 3) ? k->in[3] : NULL, *pk = has_in(k, 4) ? k->in[4] : NULL,
                    *pv = has_in(k, 5) ? k->in[5] : NULL, *np = has_in(k, 6) ? k->in[6] : NULL;
    char b0[160], b1[160];
    wf__ku_attn_view vq, vk, vv;
    wf_status *s;
    if ((s = view_of(k, Q, attr_i(k, "q_num_heads", 0), "Q", &vq)) ||
        (s = view_of(k, K, attr_i(k, "kv_num_heads", 0), "K", &vk)) ||
        (s = view_of(k, V, attr_i(k, "kv_num_heads", 0), "V", &vv)))
        return s;
    if (!wf__ku_attn_fit(Q->rank, K->rank, V->rank, &vq, &vk, &vv) || K->dtype != Q->dtype || V->dtype != Q->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "Q %s, K %s and V do not fit (batch, heads, head sizes, dtype)",
                                  cu_tstr(Q, b0), cu_tstr(K, b1));
    cuk_attn a;
    memset(&a, 0, sizeof a);
    a.B = vq.B, a.Hq = vq.H, a.Hkv = vk.H, a.Sq = vq.S, a.Dk = vk.D, a.Dv = vv.D;
    a.qbs = vq.bs, a.qhs = vq.hs, a.qss = vq.ss, a.q4 = Q->rank == 4;
    a.causal = attr_i(k, "is_causal", 0) != 0;
    a.left = attr_i(k, "left_window_size", -1);
    a.right = attr_i(k, "right_window_size", -1);
    a.mode = (int)attr_i(k, "qk_matmul_output_mode", 0);
    a.replace = attr_i(k, "mask_replaces", 0) != 0;
    wf_dtype dt = Q->dtype, sp = (wf_dtype)attr_i(k, "softmax_precision", WF_DTYPE_INVALID);
    if (sp == WF_DTYPE_INVALID) sp = dt;
    if (!cu_is_float(sp))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "softmax_precision %s must be a float dtype", cu_dtype_name(sp));
    a.sp = sp;
    if ((pk != NULL) != (pv != NULL)) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "past_key needs past_value");
    if (pk) {
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != a.B || pk->dims[1] != a.Hkv || pk->dims[3] != a.Dk ||
            pv->dims[0] != a.B || pv->dims[1] != a.Hkv || pv->dims[2] != pk->dims[2] || pv->dims[3] != a.Dv ||
            pk->dtype != dt || pv->dtype != dt)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                      "past_key %s and past_value %s must be (%" PRId64 ", %" PRId64 ", past, head size)",
                                      cu_tstr(pk, b0), cu_tstr(pv, b1), a.B, a.Hkv);
        a.P = pk->dims[2];
    }
    a.T = a.P + vk.S;
    if (np) {
        if (np->rank != 1 || np->dims[0] != a.B || (np->dtype != WF_I32 && np->dtype != WF_I64))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                      "nonpad_kv_seqlen %s must have one i32 or i64 length per batch (%" PRId64 ")",
                                      cu_tstr(np, b0), a.B);
        a.np_dt = np->dtype;
    }
    if (mask) {
        /* right-aligned broadcast onto (B, Hq, Sq, T); a key dim shorter than T is padded with -inf */
        int r = mask->rank;
        bool ok = wf__ku_attn_mask_strides(r, mask->dims, a.B, a.Hq, a.Sq, a.T, a.ms);
        if (!ok)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                      "attn_mask %s does not broadcast to (%" PRId64 ", %" PRId64 ", %" PRId64
                                      ", <= %" PRId64 ")", cu_tstr(mask, b0), a.B, a.Hq, a.Sq, a.T);
        if (mask->dtype != WF_BOOL && !cu_is_float(mask->dtype))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "attn_mask must be bool or a float dtype, not %s",
                                      cu_dtype_name(mask->dtype));
        a.mlen = mask->dims[r - 1];
        a.mask_dt = mask->dtype;
    }
    const wf__attr *sca = attr(k, "scale"), *sc = attr(k, "softcap");
    double scale = sca && sca->set ? sca->f : 1.0 / sqrt((double)a.Dk);
    /* the reference scales Q and K each by sqrt(scale), rounded to the input dtype */
    a.rs = wf__ku_round_to(sqrt(scale), dt);
    a.softcap = sc ? sc->f : 0;
    if ((s = cu_enter(k))) return s;
    wf_tensor *y, *opk, *opv, *oqk;
    int64_t yd[4], pkd[4], pvd[4], qkd[4];
    wf__ku_attn_out_dims(Q->rank, a.B, a.Hq, a.Hkv, a.Sq, a.T, a.Dk, a.Dv, yd, pkd, pvd, qkd);
    if ((s = cu_host->kctx_output(k, 0, dt, Q->rank, yd, &y)) || (s = cu_host->kctx_output(k, 1, dt, 4, pkd, &opk)) ||
        (s = cu_host->kctx_output(k, 2, dt, 4, pvd, &opv)) || (s = cu_host->kctx_output(k, 3, dt, 4, qkd, &oqk)))
        return s;
    cudaStream_t st = cu_of(k)->compute;
    int es = (int)cu_size(dt);
    if ((s = cu_check(k, cuk_attn_cache(st, es, pk ? cu_ptr(pk) : NULL, cu_ptr(K), cu_ptr(opk), a.B, a.Hkv, a.P, a.T,
                                        a.Dk, vk.bs, vk.hs, vk.ss), "present_key copy")) ||
        (s = cu_check(k, cuk_attn_cache(st, es, pv ? cu_ptr(pv) : NULL, cu_ptr(V), cu_ptr(opv), a.B, a.Hkv, a.P, a.T,
                                        a.Dv, vv.bs, vv.hs, vv.ss), "present_value copy")))
        return s;
    int64_t nq = a.B * a.Hq * a.Sq;
    if (nq == 0) return NULL;
    /* the softmax scratch (a row of T doubles per query) is bounded: long sequences run in row chunks */
    int64_t per = a.T ? a.T : 1, chunk = CU_ATTN_SCRATCH / (int64_t)sizeof(double) / per;
    if (chunk < 1) chunk = 1;
    if (chunk > nq) chunk = nq;
    double *xs;
    if ((s = scratch_alloc(k, sizeof(double) * (size_t)chunk * (size_t)per, (void **)&xs))) return s;
    for (int64_t r0 = 0; r0 < nq && !s; r0 += chunk)
        s = cu_check(k, cuk_attention(st, dt, &a, cu_ptr(Q), cu_ptr(opk), cu_ptr(opv), mask ? cu_ptr(mask) : NULL,
                                      np ? cu_ptr(np) : NULL, xs, cu_ptr(oqk), cu_ptr(y), r0,
                                      nq - r0 < chunk ? nq - r0 : chunk),
                     "Attention kernel");
    return scratch_free(k, xs, s);
}

/* ---- RotaryEmbedding ---------------------------------------------------------------------------------- */

static wf_status *k_rotary(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *cc = k->in[1], *sc = k->in[2], *pos = has_in(k, 3) ? k->in[3] : NULL;
    char b0[160], b1[160], b2[160];
    wf__ku_attn_view v;
    wf_status *s = view_of(k, x, attr_i(k, "num_heads", 0), "input", &v);
    if (s) return s;
    cuk_rope g = {v.B, v.H, v.S, v.D, v.bs, v.hs, v.ss, attr_i(k, "rotary_embedding_dim", 0), 0, 0, 0};
    if (g.rd == 0) g.rd = v.D;
    g.inter = attr_i(k, "interleaved", 0) != 0;
    int64_t half = g.rd / 2;
    if (g.rd < 0 || g.rd > v.D || g.rd % 2)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "rotary_embedding_dim %" PRId64 " must be even and <= head size %" PRId64, g.rd, v.D);
    /* caches: (max_position, half) indexed by position_ids (B, S), or (B, S, half) without them */
    bool ok = cc->rank == sc->rank && cc->rank >= 1 && cc->dims[cc->rank - 1] == half && sc->dims[sc->rank - 1] == half &&
              cc->dtype == x->dtype && sc->dtype == x->dtype;
    if (pos)
        ok = ok && cc->rank == 2 && sc->dims[0] == cc->dims[0] && pos->rank == 2 && pos->dims[0] == v.B &&
             pos->dims[1] == v.S && cu_is_int(pos->dtype);
    else
        ok = ok && cc->rank == 3 && cc->dims[0] == v.B && cc->dims[1] == v.S && sc->dims[0] == v.B && sc->dims[1] == v.S;
    if (!ok)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "cos_cache %s and sin_cache %s do not fit input %s (%s, %" PRId64 " rotated dims)",
                                  cu_tstr(cc, b0), cu_tstr(sc, b1), cu_tstr(x, b2),
                                  pos ? "with position_ids" : "without position_ids", g.rd);
    if ((s = cu_enter(k))) return s;
    g.rows = pos ? cc->dims[0] : v.B * v.S;
    if (pos && pos->size) {
        /* an id outside the caches fails the run, as on the CPU: a check kernel reports it (the op kernel
         * clamps it) */
        cuk_err *err;
        unsigned long long site;
        if ((s = cu_err_site(k, CU_SITE_POSITION, 0, pos, x, &err, &site)) ||
            (s = cu_check(k, cuk_range_check(cu_of(k)->compute, cu_ptr(pos), pos->dtype == WF_I64, pos->size, 0, g.rows,
                                             g.rows, err, site),
                          "position id check")))
            return s;
        g.pos_dt = pos->dtype;
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    return cu_check(k,
                    cuk_rotary(cu_of(k)->compute, x->dtype, &g, cu_ptr(x), cu_ptr(cc), cu_ptr(sc),
                               g.pos_dt ? cu_ptr(pos) : NULL, cu_ptr(y)),
                    "RotaryEmbedding kernel");
}

/* ---- QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear ----------------------------------------- */

/* Where parameter p (scale or zero point) of input x is read (kutil_quant.h). */
static wf_status *qmap_init(wf__kctx *k, const wf_tensor *x, const wf_tensor *p, const char *what, cuk_qmap *q)
{
    char b0[160], b1[160], err[480];
    wf__ku_qmap m;
    if (!wf__ku_qmap_plan(x->rank, x->dims, cu_tstr(x, b0), p->rank, p->dims, p->size, what, cu_tstr(p, b1),
                          attr_i(k, "axis", 1), attr_i(k, "block_size", 0), &m, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    q->kind = m.kind, q->alen = m.alen, q->inner = m.inner, q->block = m.block, q->nb = m.nb;
    return NULL;
}

static wf_status *quant(wf__kctx *k, bool deq)
{
    const wf_tensor *x = k->in[0], *sc = k->in[1], *zp = has_in(k, 2) ? k->in[2] : NULL;
    wf_dtype od = (wf_dtype)attr_i(k, "output_dtype", WF_DTYPE_INVALID);
    if (deq) {
        if (od == WF_DTYPE_INVALID) od = sc->dtype;
        if (!cu_is_float(od))
            return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "dequantizing to %s is not supported", cu_dtype_name(od));
    } else {
        if (zp) od = zp->dtype;
        if (od == WF_DTYPE_INVALID) od = WF_U8;
        if (od != WF_U8 && od != WF_I8 && od != WF_I16)
            return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "quantizing to %s is not supported", cu_dtype_name(od));
    }
    if (!cu_is_float(sc->dtype) || (zp && !cu_is_int(zp->dtype)))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "scale (%s) must be float and the zero point an integer",
                                  cu_dtype_name(sc->dtype));
    cuk_qmap ms, mz;
    memset(&mz, 0, sizeof mz);
    wf_status *s = qmap_init(k, x, sc, deq ? "x_scale" : "y_scale", &ms);
    if (!s && zp) s = qmap_init(k, x, zp, deq ? "x_zero_point" : "y_zero_point", &mz);
    if (s || (s = cu_enter(k))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, od, x->rank, x->dims, &y)) || !y->size) return s;
    cudaStream_t st = cu_of(k)->compute;
    int zdt = zp ? (int)zp->dtype : 0;
    const void *zpp = zp ? cu_ptr(zp) : NULL;
    if (deq)
        return cu_check(k, cuk_dequantize(st, x->dtype, cu_ptr(x), sc->dtype, cu_ptr(sc), &ms, zdt, zpp, &mz, od, cu_ptr(y),
                                          y->size),
                        "DequantizeLinear kernel");
    /* x / scale is computed in x's dtype, or in `precision` when given, like the reference */
    wf_dtype pr = (wf_dtype)attr_i(k, "precision", WF_DTYPE_INVALID);
    if (pr == WF_DTYPE_INVALID) pr = cu_is_float(x->dtype) ? x->dtype : sc->dtype;
    int64_t lo, hi;
    wf__ku_qrange(od, &lo, &hi);
    return cu_check(k, cuk_quantize(st, x->dtype, cu_ptr(x), sc->dtype, cu_ptr(sc), &ms, zdt, zpp, &mz, od, cu_ptr(y),
                                    y->size, pr, lo, hi),
                    "QuantizeLinear kernel");
}

static wf_status *k_quantize(wf__kctx *k) { return quant(k, false); }
static wf_status *k_dequantize(wf__kctx *k) { return quant(k, true); }

static wf_status *k_dyn_quantize(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_tensor *y, *ys, *yz;
    wf_status *s;
    if ((s = cu_enter(k)) || (s = cu_host->kctx_output(k, 0, WF_U8, x->rank, x->dims, &y)) ||
        (s = cu_host->kctx_output(k, 1, WF_F32, 0, NULL, &ys)) || (s = cu_host->kctx_output(k, 2, WF_U8, 0, NULL, &yz)))
        return s;
    return cu_check(k, cuk_dyn_quantize(cu_of(k)->compute, cu_ptr(x), x->size, cu_ptr(y), cu_ptr(ys), cu_ptr(yz)),
                    "DynamicQuantizeLinear kernel");
}

/* ---- integer matmul ----------------------------------------------------------------------------------- */

/* A zero point: absent (*n 0), a scalar (1) or `want` values (rank 1), of an integer dtype. */
static wf_status *zp_check(wf__kctx *k, int idx, int64_t want, const char *what, int *dt, int64_t *n)
{
    char b[160];
    *dt = 0, *n = 0;
    if (!has_in(k, idx)) return NULL;
    const wf_tensor *z = k->in[idx];
    if (z->size != 1 && !(z->rank == 1 && z->dims[0] == want))
        return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "%s %s must be a scalar or have %" PRId64 " values", what,
                                  cu_tstr(z, b), want);
    if (!cu_is_int(z->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be an integer", what, cu_tstr(z, b));
    *dt = z->dtype;
    *n = z->size;
    return NULL;
}

static bool is_q8(wf_dtype t) { return t == WF_U8 || t == WF_I8; }

static wf_status *matmul_int(wf__kctx *k, bool qlinear)
{
    const wf_tensor *a = k->in[0], *b = k->in[qlinear ? 3 : 1];
    char b0[160], b1[160];
    wf__ku_mm mm;
    int rc = a->rank < 1 || b->rank < 1 ? WF__KU_MM_BATCH : wf__ku_mm_plan(a->rank, a->dims, b->rank, b->dims, 0, 0, &mm);
    if (rc == WF__KU_MM_INNER)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "operands %s and %s do not multiply: inner dims %" PRId64
                                  " and %" PRId64 " differ", cu_tstr(a, b0), cu_tstr(b, b1), mm.ka, mm.kb);
    if (rc != WF__KU_MM_OK)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "operands %s and %s do not multiply", cu_tstr(a, b0),
                                  cu_tstr(b, b1));
    if (!is_q8(a->dtype) || !is_q8(b->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "operands %s and %s must be u8 or i8", cu_tstr(a, b0),
                                  cu_tstr(b, b1));
    cuk_imm g;
    memset(&g, 0, sizeof g);
    g.M = mm.m, g.K = mm.kdim, g.N = mm.n, g.nb = mm.nb;
    for (int i = 0; i < mm.nb; i++) g.bat[i] = mm.bat[i], g.abat[i] = mm.abat[i], g.bbat[i] = mm.bbat[i];
    g.adt = a->dtype, g.bdt = b->dtype, g.odt = WF_I32, g.qlinear = qlinear;
    wf_status *s;
    if ((s = zp_check(k, 2, g.M, "a_zero_point", &g.azdt, &g.naz)) ||
        (s = zp_check(k, qlinear ? 5 : 3, g.N, "b_zero_point", &g.bzdt, &g.nbz)))
        return s;
    if (qlinear) {
        static const int si[3] = {1, 4, 6};
        const wf_tensor *yzp = has_in(k, 7) ? k->in[7] : NULL;
        for (int i = 0; i < 3; i++) {
            const wf_tensor *t = k->in[si[i]];
            if (t->size != 1 || !cu_is_float(t->dtype))
                return cu_host->kctx_fail(k, WF_UNIMPLEMENTED,
                                          "scale input %d %s: only per-tensor float scales are supported", si[i],
                                          cu_tstr(t, b0));
        }
        if (yzp && (yzp->size != 1 || !is_q8(yzp->dtype)))
            return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "y_zero_point %s: only a per-tensor u8 or i8 zero point is supported",
                                      cu_tstr(yzp, b0));
        if ((s = cu_enter(k))) return s;
        double sc[3];
        for (int i = 0; i < 3 && !s; i++) s = read_scalar(k, k->in[si[i]], &sc[i]);
        int64_t z = 0;
        if (!s && yzp) s = read_scalar_int(k, yzp, &z);
        if (s) return s;
        wf_dtype st = k->in[1]->dtype;
        /* the reference forms a_scale * b_scale / y_scale in the scales' dtype */
        g.mult = wf__ku_round_to(wf__ku_round_to(sc[0] * sc[1], st) / sc[2], st);
        g.z = (double)z;
        g.odt = yzp ? yzp->dtype : a->dtype;
    } else if ((s = cu_enter(k))) {
        return s;
    }
    wf__ku_qrange((wf_dtype)g.odt, &g.lo, &g.hi);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, (wf_dtype)g.odt, mm.out_rank, mm.out_dims, &y)) || !y->size) return s;
    int zb = qlinear ? 5 : 3;
    return cu_check(k,
                    cuk_matmul_int(cu_of(k)->compute, &g, cu_ptr(a), cu_ptr(b), g.naz ? cu_ptr(k->in[2]) : NULL,
                                   g.nbz ? cu_ptr(k->in[zb]) : NULL, cu_ptr(y), y->size),
                    qlinear ? "QLinearMatMul kernel" : "MatMulInteger kernel");
}

static wf_status *k_matmul_integer(wf__kctx *k) { return matmul_int(k, false); }
static wf_status *k_qlinear_matmul(wf__kctx *k) { return matmul_int(k, true); }

/* ---- integer convolution ------------------------------------------------------------------------------ */

/* Convolution geometry (kutil_quant.h); out dims into dims. */
static wf_status *conv_init(wf__kctx *k, const wf_tensor *x, const wf_tensor *w, cuk_iconv *p, int64_t *dims)
{
    char b0[160], b1[160], err[480];
    wf__ku_iconv g;
    if (!wf__ku_iconv_plan(x->rank, x->dims, cu_tstr(x, b0), w->rank, w->dims, cu_tstr(w, b1), attr_i(k, "group", 1),
                           attr(k, "kernel_shape"), attr(k, "strides"), attr(k, "dilations"), attr(k, "pads"),
                           attr_s(k, "auto_pad", "NOTSET"), &g, dims, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    p->ns = g.ns, p->N = g.N, p->C = g.C, p->M = g.M, p->G = g.G;
    for (int i = 0; i < g.ns; i++)
        p->in[i] = g.in[i], p->out[i] = g.out[i], p->k[i] = g.k[i], p->s[i] = g.s[i], p->d[i] = g.d[i], p->pb[i] = g.pb[i];
    return NULL;
}

static wf_status *conv_int(wf__kctx *k, bool qlinear)
{
    const wf_tensor *x = k->in[0], *w = k->in[qlinear ? 3 : 1];
    const wf_tensor *xzp = has_in(k, 2) ? k->in[2] : NULL;
    char b0[160], b1[160];
    cuk_iconv g;
    memset(&g, 0, sizeof g);
    int64_t dims[WF_MAX_RANK];
    wf_status *s = conv_init(k, x, w, &g, dims);
    if (s) return s;
    if (!is_q8(x->dtype) || !is_q8(w->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "x %s and w %s must be u8 or i8", cu_tstr(x, b0), cu_tstr(w, b1));
    if (xzp && (xzp->size != 1 || !cu_is_int(xzp->dtype)))
        return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "x_zero_point %s: only a per-tensor integer zero point is supported",
                                  cu_tstr(xzp, b0));
    if ((s = zp_check(k, qlinear ? 5 : 3, g.M, "w_zero_point", &g.wzdt, &g.nwz))) return s;
    g.xdt = x->dtype, g.wdt = w->dtype, g.odt = WF_I32, g.qlinear = qlinear;
    const wf_tensor *bias = NULL, *ws = NULL;
    if (qlinear) {
        const wf_tensor *xs = k->in[1], *ys = k->in[6], *yzp = has_in(k, 7) ? k->in[7] : NULL;
        ws = k->in[4];
        bias = has_in(k, 8) ? k->in[8] : NULL;
        if (xs->size != 1 || ys->size != 1 || (yzp && yzp->size != 1) || !cu_is_float(xs->dtype) || !cu_is_float(ys->dtype))
            return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "x and y scales and zero points must be per tensor");
        if ((ws->size != 1 && !(ws->rank == 1 && ws->dims[0] == g.M)) || !cu_is_float(ws->dtype))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                      "w_scale %s must be a float scalar or have one value per output channel", cu_tstr(ws, b0));
        if (yzp && !is_q8(yzp->dtype))
            return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "y_zero_point %s must be u8 or i8", cu_tstr(yzp, b0));
        if (bias && (bias->rank != 1 || bias->dims[0] != g.M || !cu_is_int(bias->dtype)))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                      "B %s must have one integer per output channel (%" PRId64 ")", cu_tstr(bias, b0), g.M);
        if ((s = cu_enter(k)) || (s = read_scalar(k, xs, &g.xs)) || (s = read_scalar(k, ys, &g.ys))) return s;
        int64_t z = 0;
        if (yzp && (s = read_scalar_int(k, yzp, &z))) return s;
        g.z = (double)z;
        g.st = xs->dtype;
        g.wsdt = ws->dtype;
        g.nws = ws->size;
        g.bdt = bias ? bias->dtype : 0;
        g.odt = yzp ? yzp->dtype : x->dtype;
    } else if ((s = cu_enter(k))) {
        return s;
    }
    if (xzp && (s = read_scalar_int(k, xzp, &g.zx))) return s;
    wf__ku_qrange((wf_dtype)g.odt, &g.lo, &g.hi);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, (wf_dtype)g.odt, x->rank, dims, &y)) || !y->size) return s;
    int wzi = qlinear ? 5 : 3;
    return cu_check(k,
                    cuk_conv_int(cu_of(k)->compute, &g, cu_ptr(x), cu_ptr(w), g.nwz ? cu_ptr(k->in[wzi]) : NULL,
                                 bias ? cu_ptr(bias) : NULL, ws ? cu_ptr(ws) : NULL, cu_ptr(y), y->size),
                    qlinear ? "QLinearConv kernel" : "ConvInteger kernel");
}

static wf_status *k_conv_integer(wf__kctx *k) { return conv_int(k, false); }
static wf_status *k_qlinear_conv(wf__kctx *k) { return conv_int(k, true); }

/* ---- table -------------------------------------------------------------------------------------------- */

#define CU_Q8 (WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8))

const wf__kernel_def cu_kernels_seq[] = {
    {"RNN", "GPU", WF__DT_FLOATS, 0, k_rnn, NULL, 0},
    {"GRU", "GPU", WF__DT_FLOATS, 0, k_rnn, NULL, 0},
    {"LSTM", "GPU", WF__DT_FLOATS, 0, k_rnn, NULL, 0},
    {"Attention", "GPU", WF__DT_FLOATS, 0, k_attention, NULL, 0},
    {"RotaryEmbedding", "GPU", WF__DT_FLOATS, 0, k_rotary, NULL, 0},
    {"QuantizeLinear", "GPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32), 0, k_quantize, NULL, 0},
    {"DequantizeLinear", "GPU", CU_Q8 | WF__DT_BIT(WF_I16) | WF__DT_BIT(WF_I32), 0, k_dequantize, NULL, 0},
    {"DynamicQuantizeLinear", "GPU", WF__DT_BIT(WF_F32), 0, k_dyn_quantize, NULL, 0},
    {"MatMulInteger", "GPU", CU_Q8, 0, k_matmul_integer, NULL, 0},
    {"QLinearMatMul", "GPU", CU_Q8, 0, k_qlinear_matmul, NULL, 0},
    {"ConvInteger", "GPU", CU_Q8, 0, k_conv_integer, NULL, 0},
    {"QLinearConv", "GPU", CU_Q8, 0, k_qlinear_conv, NULL, 0},
    {0},
};
