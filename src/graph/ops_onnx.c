/*
 * Registry entries for ONNX ops that have no older weft counterpart: the losses
 * (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), Attention and RotaryEmbedding, the quantisation
 * family (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
 * ConvInteger, QLinearConv), LpPool,
 * CenterCropPad and the window generators. Names, attributes and defaults are ONNX's latest opset;
 * kernels are in src/backends/cpu/k_onnx*.c.
 */
#include "ops/nn_window.h"
#include "graph/op.h"
#include "graph/grad_losses.h"

#include <math.h>
#include <stdio.h>

#define SB 160

static bool in_present(const wf__infer_ctx *c, int i) { return i < c->n_in && c->in[i].dtype != WF_DTYPE_INVALID; }

static void unknown_shape(wf__tinfo *t, wf_dtype dt, int rank)
{
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < WF_MAX_RANK; i++) t->dims[i] = -1;
}

static wf_status *need_index(const wf__infer_ctx *c, int idx, const char *what)
{
    char b[SB];
    if (c->in[idx].dtype != WF_I32 && c->in[idx].dtype != WF_I64)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must be i32 or i64", what, wf__tinfo_str(&c->in[idx], b));
    return NULL;
}

static wf_status *same_dtype(const wf__infer_ctx *c, int idx, int ref, const char *what, const char *ref_what)
{
    char b0[SB], b1[SB];
    if (c->in[idx].dtype != c->in[ref].dtype)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must have the dtype of %s %s", what,
                              wf__tinfo_str(&c->in[idx], b1), ref_what, wf__tinfo_str(&c->in[ref], b0));
    return NULL;
}

/* ---- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ------------------------------------------ */

static wf_status *infer_loss(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    const wf__tinfo *x = &c->in[0], *t = &c->in[1];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_index(c, 1, "target"));
    const char *red = WF__IC_S(c, "reduction");
    bool none = !strcmp(red, "none");
    if (!none && strcmp(red, "sum") && strcmp(red, "mean"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "reduction '%s' is not none, sum or mean", red);
    if (x->rank >= 0 && x->rank < 2)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s must have rank >= 2 (N, C, d1, ...)", wf__tinfo_str(x, b0));
    if (x->rank >= 0 && t->rank >= 0) {
        bool ok = t->rank == x->rank - 1;
        for (int d = 0; ok && d < t->rank; d++) {
            int64_t xd = x->dims[d ? d + 1 : 0];
            if (xd >= 0 && t->dims[d] >= 0 && xd != t->dims[d]) ok = false;
        }
        if (!ok)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "target %s must have input %s's shape without dim 1 (C)",
                                  wf__tinfo_str(t, b1), wf__tinfo_str(x, b0));
    }
    if (in_present(c, 2)) {
        const wf__tinfo *w = &c->in[2];
        WF__TRY(same_dtype(c, 2, 0, "weight", "input"));
        if (w->rank >= 0 && (w->rank != 1 || (x->rank >= 2 && x->dims[1] >= 0 && w->dims[0] >= 0 && w->dims[0] != x->dims[1])))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "weight %s must be 1-D with one value per class of input %s",
                                  wf__tinfo_str(w, b1), wf__tinfo_str(x, b0));
    }
    if (none) {
        c->out[0] = *t;
        c->out[0].dtype = x->dtype;
    } else {
        unknown_shape(&c->out[0], x->dtype, 0);
    }
    if (c->n_out > 1) c->out[1] = *x;
    return NULL;
}

/* ---- Attention ---------------------------------------------------------------------------------------- */

/* The 4-D view (batch, heads, seq, head_size) of a 3-D (batch, seq, heads * head_size) or 4-D input. */
static wf_status *attn_view(const wf__infer_ctx *c, int idx, int64_t heads, const char *what, int64_t v[4])
{
    char b[SB];
    const wf__tinfo *t = &c->in[idx];
    for (int i = 0; i < 4; i++) v[i] = -1;
    if (t->rank < 0) return NULL;
    if (t->rank == 4) {
        for (int i = 0; i < 4; i++) v[i] = t->dims[i];
        return NULL;
    }
    if (t->rank != 3)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must be 3-D or 4-D", what, wf__tinfo_str(t, b));
    if (heads <= 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "3-D %s %s needs q_num_heads and kv_num_heads > 0", what,
                              wf__tinfo_str(t, b));
    if (t->dims[2] >= 0 && t->dims[2] % heads)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "hidden size of %s %s is not a multiple of %lld heads", what,
                              wf__tinfo_str(t, b), (long long)heads);
    v[0] = t->dims[0];
    v[1] = heads;
    v[2] = t->dims[1];
    v[3] = t->dims[2] >= 0 ? t->dims[2] / heads : -1;
    return NULL;
}

static wf_status *infer_attention(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(same_dtype(c, 1, 0, "K", "Q"));
    WF__TRY(same_dtype(c, 2, 0, "V", "Q"));
    const wf__tinfo *q = &c->in[0];
    for (int i = 1; i < 3; i++)
        if (q->rank >= 0 && c->in[i].rank >= 0 && c->in[i].rank != q->rank)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "Q %s, K and V must have one rank, got %s for input %d",
                                  wf__tinfo_str(q, b0), wf__tinfo_str(&c->in[i], b1), i);
    int64_t mode = WF__IC_I(c, "qk_matmul_output_mode");
    if (mode < 0 || mode > 3)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "qk_matmul_output_mode %lld is not 0, 1, 2 or 3", (long long)mode);
    for (int i = 0; i < 2; i++) {
        const char *nm = i ? "right_window_size" : "left_window_size";
        if (WF__IC_I(c, nm) < -1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %lld must be -1 or >= 0", nm, (long long)WF__IC_I(c, nm));
    }
    if (in_present(c, 3) && c->in[3].dtype != WF_BOOL) WF__TRY(same_dtype(c, 3, 0, "attn_mask", "Q"));
    if (in_present(c, 4) != in_present(c, 5))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "past_key and past_value must be given together");
    if (in_present(c, 4)) {
        WF__TRY(same_dtype(c, 4, 0, "past_key", "Q"));
        WF__TRY(same_dtype(c, 5, 0, "past_value", "Q"));
        if (in_present(c, 6))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
    }
    if (in_present(c, 6)) {
        if (c->in[6].dtype != WF_I64 || (c->in[6].rank >= 0 && c->in[6].rank != 1))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "nonpad_kv_seqlen %s must be a 1-D i64 tensor",
                                  wf__tinfo_str(&c->in[6], b1));
    }
    int64_t qh = WF__IC_I(c, "q_num_heads"), kvh = WF__IC_I(c, "kv_num_heads");
    int64_t vq[4], vk[4], vv[4];
    WF__TRY(attn_view(c, 0, qh, "Q", vq));
    WF__TRY(attn_view(c, 1, kvh, "K", vk));
    WF__TRY(attn_view(c, 2, kvh, "V", vv));
    if (vq[1] > 0 && vk[1] > 0 && vq[1] % vk[1])
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "q heads %lld must be a multiple of kv heads %lld", (long long)vq[1],
                              (long long)vk[1]);
    if (vq[3] >= 0 && vk[3] >= 0 && vq[3] != vk[3])
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "Q head size %lld differs from K head size %lld", (long long)vq[3],
                              (long long)vk[3]);
    int64_t past = 0;
    if (in_present(c, 4)) {
        const wf__tinfo *pk = &c->in[4];
        past = pk->rank == 4 ? pk->dims[2] : -1;
        if (pk->rank >= 0 && pk->rank != 4)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "past_key %s must be 4-D", wf__tinfo_str(pk, b1));
    }
    int64_t total = (past >= 0 && vk[2] >= 0) ? past + vk[2] : -1;
    wf_dtype dt = q->dtype;
    /* Y keeps Q's layout, with V's head size. */
    if (q->rank == 3) {
        unknown_shape(&c->out[0], dt, 3);
        c->out[0].dims[0] = vq[0];
        c->out[0].dims[1] = vq[2];
        c->out[0].dims[2] = (vq[1] >= 0 && vv[3] >= 0) ? vq[1] * vv[3] : -1;
    } else if (q->rank == 4) {
        unknown_shape(&c->out[0], dt, 4);
        c->out[0].dims[0] = vq[0];
        c->out[0].dims[1] = vq[1];
        c->out[0].dims[2] = vq[2];
        c->out[0].dims[3] = vv[3];
    } else {
        unknown_shape(&c->out[0], dt, -1);
    }
    int64_t pk[4] = {vk[0], vk[1], total, vk[3]}, pv[4] = {vv[0], vv[1], total, vv[3]};
    int64_t qk[4] = {vq[0], vq[1], vq[2], total};
    unknown_shape(&c->out[1], dt, 4);
    unknown_shape(&c->out[2], dt, 4);
    unknown_shape(&c->out[3], dt, 4);
    memcpy(c->out[1].dims, pk, sizeof pk);
    memcpy(c->out[2].dims, pv, sizeof pv);
    memcpy(c->out[3].dims, qk, sizeof qk);
    return NULL;
}

/* Two products of B x Hq x Sq x T scores: Q K^T over the key head size, P V over V's. */
static void cost_attention(const wf__infer_ctx *c, double *flops, double *bytes)
{
    const wf__tinfo *qk = &c->out[3], *pk = &c->out[1], *pv = &c->out[2];
    double scores = (double)wf__numel(qk->rank, qk->dims), dk = (double)pk->dims[3], dv = (double)pv->dims[3];
    *flops = scores > 0 && dk > 0 && dv > 0 ? scores * (2.0 * dk + 2.0 * dv + 8.0) : 0;
    *bytes = 0;
    for (int i = 0; i < c->n_in; i++)
        if (in_present(c, i)) *bytes += (double)wf__numel(c->in[i].rank, c->in[i].dims) * (double)wf_dtype_size(c->in[i].dtype);
    for (int i = 0; i < c->n_out; i++)
        *bytes += (double)wf__numel(c->out[i].rank, c->out[i].dims) * (double)wf_dtype_size(c->out[i].dtype);
}

/* ---- RotaryEmbedding ------------------------------------------------------------------------------- */

static wf_status *infer_rotary(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(same_dtype(c, 1, 0, "cos_cache", "input"));
    WF__TRY(same_dtype(c, 2, 0, "sin_cache", "input"));
    if (in_present(c, 3)) WF__TRY(need_index(c, 3, "position_ids"));
    const wf__tinfo *x = &c->in[0];
    if (x->rank >= 0 && x->rank != 3 && x->rank != 4)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s must be 3-D or 4-D", wf__tinfo_str(x, b));
    if (x->rank == 3 && WF__IC_I(c, "num_heads") <= 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "3-D input %s needs num_heads > 0", wf__tinfo_str(x, b));
    c->out[0] = *x;
    return NULL;
}

/* ---- quantisation ---------------------------------------------------------------------------------- */

#define QTYPES (WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8) | WF__DT_BIT(WF_I16))

/* Scale (and zero point) shapes: a scalar or one value (per tensor), 1-D over `axis` (per axis), or the
 * input's rank with dim `axis` divided into blocks of block_size (blocked). */
static wf_status *check_qparam(const wf__infer_ctx *c, int idx, const char *what)
{
    char b0[SB], b1[SB];
    const wf__tinfo *x = &c->in[0], *s = &c->in[idx];
    if (x->rank < 0 || s->rank < 0) return NULL;
    int64_t bs = WF__IC_I(c, "block_size"), n = wf__numel(s->rank, s->dims);
    if (bs < 0) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "block_size %lld must be >= 0", (long long)bs);
    if (s->rank == 0 || (s->rank == 1 && n == 1 && bs == 0)) return NULL;
    int ax;
    if (!wf__norm_axis(WF__IC_I(c, "axis"), x->rank, &ax))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                              (long long)WF__IC_I(c, "axis"), wf__tinfo_str(x, b0));
    bool ok;
    if (bs == 0) {
        ok = s->rank == 1 && (s->dims[0] < 0 || x->dims[ax] < 0 || s->dims[0] == x->dims[ax]);
    } else {
        ok = s->rank == x->rank;
        for (int d = 0; ok && d < x->rank; d++) {
            if (s->dims[d] < 0 || x->dims[d] < 0) continue;
            ok = d == ax ? s->dims[d] == (x->dims[d] + bs - 1) / bs : s->dims[d] == x->dims[d];
        }
    }
    if (!ok)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "%s %s does not fit input %s (axis %d, block_size %lld): give a scalar, one value per "
                              "index of the axis, or blocks",
                              what, wf__tinfo_str(s, b1), wf__tinfo_str(x, b0), ax, (long long)bs);
    return NULL;
}

static wf_status *infer_quantize(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS | WF__DT_BIT(WF_I32)));
    WF__TRY(wf__infer_check_dtype(c, 1, WF__DT_FLOATS | WF__DT_BIT(WF_I32)));
    WF__TRY(check_qparam(c, 1, "y_scale"));
    wf_dtype od = (wf_dtype)WF__IC_I(c, "output_dtype");
    if (in_present(c, 2)) {
        WF__TRY(check_qparam(c, 2, "y_zero_point"));
        if (od != WF_DTYPE_INVALID && od != c->in[2].dtype)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "output_dtype %s differs from y_zero_point %s",
                                  wf_dtype_name(od), wf__tinfo_str(&c->in[2], b));
        od = c->in[2].dtype;
    }
    if (od == WF_DTYPE_INVALID) od = WF_U8;
    if (!(WF__DT_BIT(od) & QTYPES))
        return wf__infer_fail(c, WF_UNIMPLEMENTED, "quantizing to %s is not supported (u8, i8, i16 are)", wf_dtype_name(od));
    wf_dtype pr = (wf_dtype)WF__IC_I(c, "precision");
    if (pr != WF_DTYPE_INVALID && !wf__dtype_is_float(pr))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "precision %s must be a float dtype", wf_dtype_name(pr));
    c->out[0] = c->in[0];
    c->out[0].dtype = od;
    return NULL;
}

static wf_status *infer_dequantize(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, QTYPES | WF__DT_BIT(WF_I32)));
    WF__TRY(wf__infer_check_dtype(c, 1, WF__DT_FLOATS));
    WF__TRY(check_qparam(c, 1, "x_scale"));
    if (in_present(c, 2)) {
        WF__TRY(same_dtype(c, 2, 0, "x_zero_point", "x"));
        WF__TRY(check_qparam(c, 2, "x_zero_point"));
    }
    wf_dtype od = (wf_dtype)WF__IC_I(c, "output_dtype");
    if (od == WF_DTYPE_INVALID) od = c->in[1].dtype;
    if (!wf__dtype_is_float(od))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "output_dtype %s must be a float dtype", wf_dtype_name(od));
    c->out[0] = c->in[0];
    c->out[0].dtype = od;
    return NULL;
}

static wf_status *infer_dynamic_quantize(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_BIT(WF_F32)));
    c->out[0] = c->in[0];
    c->out[0].dtype = WF_U8;
    unknown_shape(&c->out[1], WF_F32, 0);
    unknown_shape(&c->out[2], WF_U8, 0);
    return NULL;
}

/* numpy matmul shape of a and b (ranks >= 1), with 1-D operands promoted and their dims dropped. */
static wf_status *matmul_shape(wf__infer_ctx *c, const wf__tinfo *a, const wf__tinfo *b, wf_dtype dt)
{
    char b0[SB], b1[SB];
    if (a->rank < 0 || b->rank < 0) {
        unknown_shape(&c->out[0], dt, -1);
        return NULL;
    }
    if (a->rank < 1 || b->rank < 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "operands %s and %s must have rank >= 1", wf__tinfo_str(a, b0),
                              wf__tinfo_str(b, b1));
    int64_t ka = a->dims[a->rank - 1], kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "inner dims of %s and %s differ", wf__tinfo_str(a, b0),
                              wf__tinfo_str(b, b1));
    wf__tinfo ba = *a, bb = *b;
    ba.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    int r;
    int64_t d[WF_MAX_RANK];
    if (!wf__broadcast_tinfo(&ba, &bb, &r, d))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "batch dims of %s and %s do not broadcast", wf__tinfo_str(a, b0),
                              wf__tinfo_str(b, b1));
    if (a->rank >= 2) d[r++] = a->dims[a->rank - 2];
    if (b->rank >= 2) d[r++] = b->dims[b->rank - 1];
    if (r > WF_MAX_RANK) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "result rank %d is too large", r);
    unknown_shape(&c->out[0], dt, r);
    memcpy(c->out[0].dims, d, sizeof(int64_t) * (size_t)r);
    return NULL;
}

static wf_status *infer_matmul_integer(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    WF__TRY(wf__infer_check_dtype(c, 1, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    if (in_present(c, 2)) WF__TRY(same_dtype(c, 2, 0, "a_zero_point", "A"));
    if (in_present(c, 3)) WF__TRY(same_dtype(c, 3, 1, "b_zero_point", "B"));
    return matmul_shape(c, &c->in[0], &c->in[1], WF_I32);
}

static wf_status *infer_qlinear_matmul(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    WF__TRY(wf__infer_check_dtype(c, 3, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    static const int scales[] = {1, 4, 6};
    static const char *const snames[] = {"a_scale", "b_scale", "y_scale"};
    for (int i = 0; i < 3; i++) {
        WF__TRY(wf__infer_check_dtype(c, scales[i], WF__DT_FLOATS));
        if (i) WF__TRY(same_dtype(c, scales[i], 1, snames[i], "a_scale"));
    }
    if (in_present(c, 2)) WF__TRY(same_dtype(c, 2, 0, "a_zero_point", "a"));
    if (in_present(c, 5)) WF__TRY(same_dtype(c, 5, 3, "b_zero_point", "b"));
    wf_dtype od = in_present(c, 7) ? c->in[7].dtype : c->in[0].dtype;
    if (od != WF_U8 && od != WF_I8)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "y_zero_point must be u8 or i8, got %s", wf_dtype_name(od));
    return matmul_shape(c, &c->in[0], &c->in[3], od);
}

/* ---- ConvInteger / QLinearConv ---------------------------------------------------------------------- */

/* x (N, C, spatial...) and w (M, C / group, kernel...) at inputs xi and wi. */
static wf_status *infer_qconv(wf__infer_ctx *c, int xi, int wi, wf_dtype od)
{
    char b0[SB], b1[SB];
    const wf__tinfo *x = &c->in[xi], *w = &c->in[wi];
    unknown_shape(&c->out[0], od, x->rank);
    if (x->rank < 0 || w->rank < 0) return NULL;
    int ns = x->rank - 2;
    int64_t g = WF__IC_I(c, "group");
    const wf__attr *ks = WF__IC_A(c, "kernel_shape"), *st = WF__IC_A(c, "strides"), *dl = WF__IC_A(c, "dilations"),
                   *pd = WF__IC_A(c, "pads");
    if (ns < 1 || w->rank != x->rank || g < 1 || (ks->n && ks->n != ns) || (st->n && st->n != ns) ||
        (dl->n && dl->n != ns) || (pd->n && pd->n != 2 * ns))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s and weight %s do not fit the attributes (group %lld)",
                              wf__tinfo_str(x, b0), wf__tinfo_str(w, b1), (long long)g);
    int64_t wg;
    if (x->dims[1] >= 0 && w->dims[1] >= 0 &&
        (wf__mul_overflow_i64(w->dims[1], g, &wg) || x->dims[1] != wg || (w->dims[0] >= 0 && w->dims[0] % g)))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s must have group (%lld) times weight %s's input channels",
                              wf__tinfo_str(x, b0), (long long)g, wf__tinfo_str(w, b1));
    const char *ap = WF__IC_S(c, "auto_pad");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    if (!same && !valid && strcmp(ap, "NOTSET"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
    c->out[0].dims[0] = x->dims[0];
    c->out[0].dims[1] = w->dims[0];
    for (int i = 0; i < ns; i++) {
        int64_t k = ks->n ? ks->ints[i] : w->dims[i + 2], s = st->n ? st->ints[i] : 1, d = dl->n ? dl->ints[i] : 1;
        int64_t in = x->dims[i + 2];
        if (in < 0 || k < 0) continue;
        if (s < 1 || d < 1) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "strides and dilations must be >= 1");
        int64_t p = 0, pb = same || valid || !pd->n ? 0 : pd->ints[i];
        if (!same && !valid && pd->n && wf__add_overflow_i64(pd->ints[i], pd->ints[i + ns], &p)) p = INT64_MAX;
        int64_t o = p == INT64_MAX ? -2 : wf__nn_window_out(in, k, s, d, pb, p, same, false);
        if (o == -1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "kernel is larger than padded input %s", wf__tinfo_str(x, b0));
        if (o == -2)
            return wf__infer_overflow(c, "the output size of spatial dim %d overflows int64 (kernel %lld, stride %lld, "
                                      "dilation %lld)", i, (long long)k, (long long)s, (long long)d);
        c->out[0].dims[i + 2] = o;
    }
    return NULL;
}

static wf_status *infer_conv_integer(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    WF__TRY(wf__infer_check_dtype(c, 1, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    if (in_present(c, 2)) WF__TRY(same_dtype(c, 2, 0, "x_zero_point", "x"));
    if (in_present(c, 3)) WF__TRY(same_dtype(c, 3, 1, "w_zero_point", "w"));
    return infer_qconv(c, 0, 1, WF_I32);
}

static wf_status *infer_qlinear_conv(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    WF__TRY(wf__infer_check_dtype(c, 3, WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8)));
    static const int scales[] = {1, 4, 6};
    for (int i = 0; i < 3; i++) WF__TRY(wf__infer_check_dtype(c, scales[i], WF__DT_FLOATS));
    if (in_present(c, 8)) WF__TRY(wf__infer_check_dtype(c, 8, WF__DT_BIT(WF_I32)));
    wf_dtype od = in_present(c, 7) ? c->in[7].dtype : c->in[0].dtype;
    if (od != WF_U8 && od != WF_I8)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "y_zero_point must be u8 or i8, got %s", wf_dtype_name(od));
    return infer_qconv(c, 0, 3, od);
}

/* ---- LpPool ------------------------------------------------------------------------------------------ */

/* Output size and begin pad of one spatial dim; shared with the kernel through the same attributes. */
static wf_status *lppool_shape(wf__infer_ctx *c, const wf__tinfo *x)
{
    char b[SB];
    const wf__attr *ks = WF__IC_A(c, "kernel_shape"), *st = WF__IC_A(c, "strides"), *dl = WF__IC_A(c, "dilations"),
                   *pd = WF__IC_A(c, "pads");
    int ns = x->rank - 2;
    if (ns < 1) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s must have rank >= 3 (N, C, spatial...)", wf__tinfo_str(x, b));
    if (ks->n != ns) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "kernel_shape has %d values for input %s", ks->n, wf__tinfo_str(x, b));
    if ((st->n && st->n != ns) || (dl->n && dl->n != ns) || (pd->n && pd->n != 2 * ns))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "strides, dilations and pads must have %d, %d and %d values", ns, ns,
                              2 * ns);
    const char *ap = WF__IC_S(c, "auto_pad");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    if (!same && !valid && strcmp(ap, "NOTSET"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
    if (WF__IC_I(c, "p") < 1) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "p %lld must be >= 1", (long long)WF__IC_I(c, "p"));
    c->out[0] = *x;
    for (int i = 0; i < ns; i++) {
        int64_t k = ks->ints[i], s = st->n ? st->ints[i] : 1, d = dl->n ? dl->ints[i] : 1;
        if (k < 1 || s < 1 || d < 1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "kernel_shape, strides and dilations must be >= 1");
        int64_t in = x->dims[i + 2];
        if (in < 0) {
            c->out[0].dims[i + 2] = -1;
            continue;
        }
        int64_t p = 0, pb = pd->n ? pd->ints[i] : 0;
        if (!valid && pd->n && wf__add_overflow_i64(pd->ints[i], pd->ints[i + ns], &p)) p = INT64_MAX;
        int64_t o = p == INT64_MAX ? -2 : wf__nn_window_out(in, k, s, d, pb, p, same, WF__IC_I(c, "ceil_mode") != 0);
        if (o == -1) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "kernel is larger than padded input %s", wf__tinfo_str(x, b));
        if (o == -2)
            return wf__infer_overflow(c, "the output size of spatial dim %d overflows int64 (kernel %lld, stride %lld, "
                                      "dilation %lld)", i, (long long)k, (long long)s, (long long)d);
        c->out[0].dims[i + 2] = o;
    }
    return NULL;
}

static wf_status *infer_lppool(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    if (c->in[0].rank < 0) {
        c->out[0] = c->in[0];
        return NULL;
    }
    return lppool_shape(c, &c->in[0]);
}

/* ---- CenterCropPad ---------------------------------------------------------------------------------- */

static wf_status *infer_center_crop_pad(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    WF__TRY(need_index(c, 1, "shape"));
    const wf__tinfo *x = &c->in[0], *s = &c->in[1];
    const wf__attr *ax = WF__IC_A(c, "axes");
    if (s->rank >= 0 && s->rank != 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape %s must be 1-D", wf__tinfo_str(s, b1));
    c->out[0] = *x;
    if (x->rank < 0) return NULL;
    int axes[WF_MAX_RANK], na = ax->n ? ax->n : x->rank;
    unsigned seen = 0;
    for (int i = 0; i < na; i++) {
        if (!ax->n) axes[i] = i;
        else if (!wf__norm_axis(ax->ints[i], x->rank, &axes[i]) || (seen & (1u << axes[i])))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for input %s",
                                  (long long)ax->ints[i], wf__tinfo_str(x, b0));
        seen |= 1u << axes[i];
    }
    if (s->rank == 1 && s->dims[0] >= 0 && s->dims[0] != na)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape %s must have one value per axis (%d) of input %s",
                              wf__tinfo_str(s, b1), na, wf__tinfo_str(x, b0));
    int64_t v[WF_MAX_RANK];
    int n = 0;
    bool known = wf__infer_const_ints(c, 1, v, WF_MAX_RANK, &n) && n == na;
    for (int i = 0; i < na; i++) {
        if (known && v[i] < 0)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape value %lld must be >= 0", (long long)v[i]);
        c->out[0].dims[axes[i]] = known ? v[i] : -1;
    }
    return NULL;
}

/* ---- HannWindow / HammingWindow / BlackmanWindow ---------------------------------------------------- */

static wf_status *infer_window(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(need_index(c, 0, "size"));
    if (c->in[0].rank > 1 || (c->in[0].rank == 1 && c->in[0].dims[0] >= 0 && c->in[0].dims[0] != 1))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "size %s must be a scalar", wf__tinfo_str(&c->in[0], b));
    wf_dtype dt = (wf_dtype)WF__IC_I(c, "output_datatype");
    int64_t per = WF__IC_I(c, "periodic");
    if (per != 0 && per != 1) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "periodic must be 0 or 1, got %lld", (long long)per);
    if (!wf__dtype_valid(dt) || dt == WF_BOOL)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "output_datatype %s must be numeric", wf_dtype_name(dt));
    int64_t n[1];
    int cnt = 0;
    unknown_shape(&c->out[0], dt, 1);
    if (wf__infer_const_ints(c, 0, n, 1, &cnt) && cnt == 1) {
        if (n[0] < 0) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "size %lld must be >= 0", (long long)n[0]);
        c->out[0].dims[0] = n[0];
    }
    return NULL;
}

/* ---- the table ------------------------------------------------------------------------------------ */

#define LOSS_ATTRS {{"ignore_index", WF_ATTR_INT}, {"reduction", WF_ATTR_STRING, .s = "mean"}}
#define QCONV_ATTRS                                                                                      \
    {{"auto_pad", WF_ATTR_STRING, .s = "NOTSET"}, {"dilations", WF_ATTR_INTS}, {"group", WF_ATTR_INT, .i = 1}, \
     {"kernel_shape", WF_ATTR_INTS}, {"pads", WF_ATTR_INTS}, {"strides", WF_ATTR_INTS}}
#define WINDOW_OP(NAME)                                                                                   \
    {.name = NAME, .host_in = 1u, .min_in = 1, .max_in = 1, .n_out = 1,                                   \
     .attrs = {{"output_datatype", WF_ATTR_DTYPE, .i = WF_F32}, {"periodic", WF_ATTR_INT, .i = 1}},       \
     .infer = infer_window}

const wf__op_def wf__ops_onnx[] = {
    {.name = "NegativeLogLikelihoodLoss", .min_in = 2, .max_in = 3, .n_out = 1, .attrs = LOSS_ATTRS, .infer = infer_loss,
     .grad = wf__grad_class_loss},
    {.name = "SoftmaxCrossEntropyLoss", .min_in = 2, .max_in = 3, .n_out = 2, .attrs = LOSS_ATTRS, .infer = infer_loss,
     .grad = wf__grad_class_loss},
    {.name = "Attention", .min_in = 3, .max_in = 7, .n_out = 4,
     .attrs = {{"is_causal", WF_ATTR_INT, .i = 0}, {"kv_num_heads", WF_ATTR_INT, .i = 0},
               {"q_num_heads", WF_ATTR_INT, .i = 0}, {"qk_matmul_output_mode", WF_ATTR_INT, .i = 0},
               {"scale", WF_ATTR_FLOAT}, {"softcap", WF_ATTR_FLOAT, .f = 0.0},
               {"softmax_precision", WF_ATTR_DTYPE, .i = WF_DTYPE_INVALID},
               {"left_window_size", WF_ATTR_INT, .i = -1}, {"right_window_size", WF_ATTR_INT, .i = -1},
               /* weft's own (passes/attention.c): 1, a key the mask, causality, window or lengths forbid
                * gets the score -inf, as Where(allowed, scores, -inf) gives, instead of ONNX's -inf added
                * (a NaN or +inf score there stays NaN) */
               {"mask_replaces", WF_ATTR_INT, .i = 0}},
     .infer = infer_attention, .cost = cost_attention},
    {.name = "RotaryEmbedding", .min_in = 3, .max_in = 4, .n_out = 1,
     .attrs = {{"interleaved", WF_ATTR_INT, .i = 0}, {"num_heads", WF_ATTR_INT, .i = 0},
               {"rotary_embedding_dim", WF_ATTR_INT, .i = 0}},
     .infer = infer_rotary},
    {.name = "QuantizeLinear", .min_in = 2, .max_in = 3, .n_out = 1,
     .attrs = {{"axis", WF_ATTR_INT, .i = 1}, {"saturate", WF_ATTR_INT, .i = 1}, {"block_size", WF_ATTR_INT, .i = 0},
               {"output_dtype", WF_ATTR_DTYPE, .i = WF_DTYPE_INVALID},
               {"precision", WF_ATTR_DTYPE, .i = WF_DTYPE_INVALID}},
     .infer = infer_quantize},
    {.name = "DequantizeLinear", .min_in = 2, .max_in = 3, .n_out = 1,
     .attrs = {{"axis", WF_ATTR_INT, .i = 1}, {"block_size", WF_ATTR_INT, .i = 0},
               {"output_dtype", WF_ATTR_DTYPE, .i = WF_DTYPE_INVALID}},
     .infer = infer_dequantize},
    {.name = "DynamicQuantizeLinear", .min_in = 1, .max_in = 1, .n_out = 3, .infer = infer_dynamic_quantize},
    {.name = "MatMulInteger", .min_in = 2, .max_in = 4, .n_out = 1, .infer = infer_matmul_integer},
    {.name = "QLinearMatMul", .min_in = 8, .max_in = 8, .n_out = 1, .infer = infer_qlinear_matmul},
    {.name = "ConvInteger", .min_in = 2, .max_in = 4, .n_out = 1, .attrs = QCONV_ATTRS, .infer = infer_conv_integer},
    {.name = "QLinearConv", .min_in = 8, .max_in = 9, .n_out = 1, .attrs = QCONV_ATTRS, .infer = infer_qlinear_conv},
    {.name = "LpPool", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"auto_pad", WF_ATTR_STRING, .s = "NOTSET"}, {"ceil_mode", WF_ATTR_INT, .i = 0},
               {"dilations", WF_ATTR_INTS}, {"kernel_shape", WF_ATTR_INTS, .required = true},
               {"p", WF_ATTR_INT, .i = 2}, {"pads", WF_ATTR_INTS}, {"strides", WF_ATTR_INTS}},
     .infer = infer_lppool},
    {.name = "CenterCropPad", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {{"axes", WF_ATTR_INTS}},
     .infer = infer_center_crop_pad},
    WINDOW_OP("HannWindow"),
    WINDOW_OP("HammingWindow"),
    WINDOW_OP("BlackmanWindow"),
    {0},
};
