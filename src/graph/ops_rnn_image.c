/*
 * Ops from the ONNX suite: recurrent (RNN, GRU, LSTM), sampling (GridSample, AffineGrid, RoiAlign,
 * Col2Im, MaxUnpool), detection (NonMaxSuppression), Unique, DFT and BitCast. Names, inputs, outputs
 * and defaults follow the latest ONNX opset; kernels are in src/backends/cpu/k_rnn.c,
 * k_image_sample.c and k_signal_misc.c.
 */
#include "graph/op.h"

#include <stdio.h>

#define SB 160

static bool present(const wf__infer_ctx *c, int i) { return i < c->n_in && c->in[i].dtype != WF_DTYPE_INVALID; }

static void unknown(wf__tinfo *t, wf_dtype dt, int rank)
{
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < WF_MAX_RANK; i++) t->dims[i] = -1;
}

static wf_status *need_rank(const wf__infer_ctx *c, int idx, int rank, const char *what)
{
    char b[SB];
    if (c->in[idx].rank >= 0 && c->in[idx].rank != rank)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must have rank %d", what, wf__tinfo_str(&c->in[idx], b),
                              rank);
    return NULL;
}

static wf_status *need_same_dtype(const wf__infer_ctx *c, int idx, const char *what)
{
    char b0[SB], b1[SB];
    if (present(c, idx) && c->in[idx].dtype != c->in[0].dtype)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must have the dtype of input 0 %s", what,
                              wf__tinfo_str(&c->in[idx], b1), wf__tinfo_str(&c->in[0], b0));
    return NULL;
}

static wf_status *need_index(const wf__infer_ctx *c, int idx, const char *what)
{
    char b[SB];
    if (present(c, idx) && c->in[idx].dtype != WF_I32 && c->in[idx].dtype != WF_I64)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must be i32 or i64", what, wf__tinfo_str(&c->in[idx], b));
    return NULL;
}

/* ---- RNN, GRU, LSTM -------------------------------------------------------------------------------- */

static int rnn_gates(const char *op) { return !strcmp(op, "LSTM") ? 4 : !strcmp(op, "GRU") ? 3 : 1; }

static wf_status *infer_rnn(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    static const char *const names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
    for (int i = 1; i < c->n_in; i++)
        if (i != 4) WF__TRY(need_same_dtype(c, i, names[i]));
    WF__TRY(need_index(c, 4, "sequence_lens"));
    WF__TRY(need_rank(c, 0, 3, "X"));
    WF__TRY(need_rank(c, 1, 3, "W"));
    WF__TRY(need_rank(c, 2, 3, "R"));
    const char *dir = WF__IC_S(c, "direction");
    int nd = !strcmp(dir, "bidirectional") ? 2 : (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) ? 1 : 0;
    if (!nd)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "direction '%s' is not one of forward, reverse, bidirectional", dir);
    int64_t layout = WF__IC_I(c, "layout");
    if (layout != 0 && layout != 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "layout must be 0 or 1, got %lld", (long long)layout);
    int g = rnn_gates(c->op->name);
    const wf__tinfo *x = &c->in[0], *w = &c->in[1], *r = &c->in[2];
    int64_t hs = WF__IC_A(c, "hidden_size")->set ? WF__IC_I(c, "hidden_size") : -1;
    if (hs < 0 && r->rank == 3) hs = r->dims[2];
    if (w->rank == 3 && w->dims[0] >= 0 && w->dims[0] != nd)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "W %s must have %d direction(s) for direction '%s'",
                              wf__tinfo_str(w, b0), nd, dir);
    if (hs >= 0 && w->rank == 3 && w->dims[1] >= 0 && w->dims[1] != g * hs)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "W %s must have %d * hidden_size = %lld rows", wf__tinfo_str(w, b0),
                              g, (long long)(g * hs));
    if (hs >= 0 && r->rank == 3 && ((r->dims[1] >= 0 && r->dims[1] != g * hs) || (r->dims[2] >= 0 && r->dims[2] != hs)))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "R %s must be [%d, %lld, %lld]", wf__tinfo_str(r, b0), nd,
                              (long long)(g * hs), (long long)hs);
    if (x->rank == 3 && w->rank == 3 && x->dims[2] >= 0 && w->dims[2] >= 0 && x->dims[2] != w->dims[2])
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "X %s and W %s disagree on the input size", wf__tinfo_str(x, b0),
                              wf__tinfo_str(w, b1));
    int64_t seq = x->rank == 3 ? x->dims[layout ? 1 : 0] : -1, batch = x->rank == 3 ? x->dims[layout ? 0 : 1] : -1;
    wf_dtype dt = x->dtype;
    unknown(&c->out[0], dt, 4);
    int64_t y[4] = {seq, nd, batch, hs}, yl[4] = {batch, seq, nd, hs};
    memcpy(c->out[0].dims, layout ? yl : y, sizeof y);
    for (int k = 1; k < c->n_out; k++) {
        unknown(&c->out[k], dt, 3);
        int64_t h[3] = {nd, batch, hs}, hl[3] = {batch, nd, hs};
        memcpy(c->out[k].dims, layout ? hl : h, sizeof h);
    }
    return NULL;
}

#define RNN_COMMON_ATTRS                                                                                   \
    {"activation_alpha", WF_ATTR_FLOATS}, {"activation_beta", WF_ATTR_FLOATS}, {"activations", WF_ATTR_STRING, .s = ""}, \
    {"clip", WF_ATTR_FLOAT, .f = 0.0}, {"direction", WF_ATTR_STRING, .s = "forward"},                      \
    {"hidden_size", WF_ATTR_INT, .i = 0}, {"layout", WF_ATTR_INT, .i = 0}

/* ---- GridSample, AffineGrid ------------------------------------------------------------------------ */

static wf_status *infer_grid_sample(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(wf__infer_check_dtype(c, 1, WF__DT_FLOATS));
    const wf__tinfo *x = &c->in[0], *g = &c->in[1];
    const char *mode = WF__IC_S(c, "mode"), *pad = WF__IC_S(c, "padding_mode");
    if (strcmp(mode, "linear") && strcmp(mode, "bilinear") && strcmp(mode, "nearest") && strcmp(mode, "cubic") &&
        strcmp(mode, "bicubic"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "mode '%s' is not one of linear, nearest, cubic", mode);
    if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "padding_mode '%s' is not one of zeros, border, reflection", pad);
    if (x->rank >= 0 && (x->rank < 3 || x->rank > 5))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "X %s must be [N, C, spatial...] with 1 to 3 spatial dims",
                              wf__tinfo_str(x, b0));
    if (x->rank >= 0 && g->rank >= 0 &&
        (g->rank != x->rank || (g->dims[g->rank - 1] >= 0 && g->dims[g->rank - 1] != x->rank - 2) ||
         (x->dims[0] >= 0 && g->dims[0] >= 0 && x->dims[0] != g->dims[0])))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "grid %s must be [N, out spatial..., %d] for X %s",
                              wf__tinfo_str(g, b1), x->rank - 2, wf__tinfo_str(x, b0));
    int rank = x->rank >= 0 ? x->rank : g->rank;
    unknown(&c->out[0], x->dtype, rank);
    if (rank < 0) return NULL;
    if (x->rank >= 0) c->out[0].dims[0] = x->dims[0], c->out[0].dims[1] = x->dims[1];
    if (g->rank >= 0) {
        if (c->out[0].dims[0] < 0) c->out[0].dims[0] = g->dims[0];
        for (int i = 2; i < rank; i++) c->out[0].dims[i] = g->dims[i - 1];
    }
    return NULL;
}

static wf_status *infer_affine_grid(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_index(c, 1, "size"));
    WF__TRY(need_rank(c, 0, 3, "theta"));
    const wf__tinfo *th = &c->in[0];
    int64_t sz[5];
    int n = 0;
    bool known = wf__infer_const_ints(c, 1, sz, 5, &n);
    int nsp = known ? n - 2 : th->rank == 3 && th->dims[1] >= 0 ? (int)th->dims[1] : c->in[1].rank == 1 && c->in[1].dims[0] >= 0 ? (int)c->in[1].dims[0] - 2 : -1;
    if (nsp >= 0 && nsp != 2 && nsp != 3)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "size must hold 4 (N, C, H, W) or 5 (N, C, D, H, W) values");
    if (nsp > 0 && th->rank == 3 && ((th->dims[1] >= 0 && th->dims[1] != nsp) || (th->dims[2] >= 0 && th->dims[2] != nsp + 1)))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "theta %s must be [N, %d, %d] for %d-D grids", wf__tinfo_str(th, b),
                              nsp, nsp + 1, nsp);
    if (nsp < 0) {
        unknown(&c->out[0], th->dtype, -1);
        return NULL;
    }
    unknown(&c->out[0], th->dtype, nsp + 2);
    c->out[0].dims[0] = th->rank == 3 ? th->dims[0] : -1;
    c->out[0].dims[nsp + 1] = nsp;
    if (known)
        for (int i = 0; i < nsp; i++) c->out[0].dims[1 + i] = sz[2 + i];
    return NULL;
}

/* ---- RoiAlign, Col2Im, MaxUnpool --------------------------------------------------------------------- */

static wf_status *infer_roi_align(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_same_dtype(c, 1, "rois"));
    WF__TRY(need_index(c, 2, "batch_indices"));
    WF__TRY(need_rank(c, 0, 4, "X"));
    WF__TRY(need_rank(c, 1, 2, "rois"));
    WF__TRY(need_rank(c, 2, 1, "batch_indices"));
    const char *mode = WF__IC_S(c, "mode"), *ct = WF__IC_S(c, "coordinate_transformation_mode");
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "mode '%s' is not avg or max", mode);
    if (strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "coordinate_transformation_mode '%s' is not half_pixel or output_half_pixel", ct);
    int64_t oh = WF__IC_I(c, "output_height"), ow = WF__IC_I(c, "output_width");
    if (oh < 1 || ow < 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "output_height %lld and output_width %lld must be >= 1",
                              (long long)oh, (long long)ow);
    unknown(&c->out[0], c->in[0].dtype, 4);
    c->out[0].dims[0] = c->in[1].rank == 2 ? c->in[1].dims[0] : c->in[2].rank == 1 ? c->in[2].dims[0] : -1;
    c->out[0].dims[1] = c->in[0].rank == 4 ? c->in[0].dims[1] : -1;
    c->out[0].dims[2] = oh;
    c->out[0].dims[3] = ow;
    return NULL;
}

static wf_status *infer_col2im(wf__infer_ctx *c)
{
    WF__TRY(need_index(c, 1, "image_shape"));
    WF__TRY(need_index(c, 2, "block_shape"));
    WF__TRY(need_rank(c, 0, 3, "input"));
    int64_t img[WF_MAX_RANK], blk[WF_MAX_RANK];
    int ni = 0, nb = 0;
    bool ki = wf__infer_const_ints(c, 1, img, WF_MAX_RANK - 2, &ni), kb = wf__infer_const_ints(c, 2, blk, WF_MAX_RANK - 2, &nb);
    int nsp = ki ? ni : kb ? nb : c->in[1].rank == 1 ? (int)c->in[1].dims[0] : -1;
    if (ki && kb && ni != nb)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "image_shape has %d values but block_shape %d", ni, nb);
    if (nsp < 0) {
        unknown(&c->out[0], c->in[0].dtype, -1);
        return NULL;
    }
    if (nsp < 1 || nsp > WF_MAX_RANK - 2)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "image_shape must hold 1 to %d values", WF_MAX_RANK - 2);
    unknown(&c->out[0], c->in[0].dtype, nsp + 2);
    const wf__tinfo *x = &c->in[0];
    if (x->rank == 3) c->out[0].dims[0] = x->dims[0];
    if (kb && x->rank == 3 && x->dims[1] >= 0) {
        int64_t p = 1;
        for (int i = 0; i < nb && p > 0; i++)
            if (blk[i] <= 0 || wf__mul_overflow_i64(p, blk[i], &p)) p = 0;
        if (p <= 0 || x->dims[1] % p)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input dim 1 (%lld) is not a multiple of the block size %lld",
                                  (long long)x->dims[1], (long long)p);
        c->out[0].dims[1] = x->dims[1] / p;
    }
    if (ki)
        for (int i = 0; i < ni; i++) c->out[0].dims[2 + i] = img[i];
    return NULL;
}

static wf_status *infer_max_unpool(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_NUMERIC));
    WF__TRY(need_index(c, 1, "I"));
    WF__TRY(need_index(c, 2, "output_shape"));
    const wf__attr *ks = WF__IC_A(c, "kernel_shape"), *st = WF__IC_A(c, "strides"), *pd = WF__IC_A(c, "pads");
    const wf__tinfo *x = &c->in[0];
    int nsp = ks->n;
    if (nsp < 1 || nsp > WF_MAX_RANK - 2)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "kernel_shape must hold 1 to %d values", WF_MAX_RANK - 2);
    if ((st->n && st->n != nsp) || (pd->n && pd->n != 2 * nsp))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "strides (%d values) and pads (%d) must match kernel_shape (%d)",
                              st->n, pd->n, nsp);
    if (x->rank >= 0 && x->rank != nsp + 2)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "X %s must have rank %d for a %d-D kernel_shape",
                              wf__tinfo_str(x, b), nsp + 2, nsp);
    unknown(&c->out[0], x->dtype, nsp + 2);
    int64_t os[WF_MAX_RANK];
    int n = 0;
    if (present(c, 2)) {
        if (wf__infer_const_ints(c, 2, os, WF_MAX_RANK, &n) && n == nsp + 2) memcpy(c->out[0].dims, os, sizeof(int64_t) * (size_t)n);
        return NULL;
    }
    if (x->rank < 0) return NULL;
    c->out[0].dims[0] = x->dims[0];
    c->out[0].dims[1] = x->dims[1];
    for (int i = 0; i < nsp; i++)
        if (x->dims[2 + i] >= 0) {
            /* (in - 1) stride + kernel - pads, checked: hostile attributes overflow int64 */
            int64_t o, pads = 0;
            bool bad = wf__mul_overflow_i64(x->dims[2 + i] - 1, st->n ? st->ints[i] : 1, &o) ||
                       wf__add_overflow_i64(o, ks->ints[i], &o) ||
                       (pd->n && wf__add_overflow_i64(pd->ints[i], pd->ints[nsp + i], &pads)) ||
                       wf__sub_overflow_i64(o, pads, &o);
            if (bad || o < 0)
                return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                      "spatial dim %d: the output size from X %s, kernel_shape, strides and pads "
                                      "is out of range",
                                      i, wf__tinfo_str(x, b));
            c->out[0].dims[2 + i] = o;
        }
    return NULL;
}

/* ---- NonMaxSuppression, Unique --------------------------------------------------------------------- */

static wf_status *infer_nms(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_same_dtype(c, 1, "scores"));
    WF__TRY(need_index(c, 2, "max_output_boxes_per_class"));
    WF__TRY(need_same_dtype(c, 3, "iou_threshold"));
    WF__TRY(need_same_dtype(c, 4, "score_threshold"));
    WF__TRY(need_rank(c, 0, 3, "boxes"));
    WF__TRY(need_rank(c, 1, 3, "scores"));
    int64_t cpb = WF__IC_I(c, "center_point_box");
    if (cpb != 0 && cpb != 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "center_point_box must be 0 or 1, got %lld", (long long)cpb);
    unknown(&c->out[0], WF_I64, 2);
    c->out[0].dims[1] = 3;
    return NULL;
}

static wf_status *infer_unique(wf__infer_ctx *c)
{
    const wf__attr *ax = WF__IC_A(c, "axis");
    const wf__tinfo *x = &c->in[0];
    unknown(&c->out[0], x->dtype, ax->set ? x->rank : 1);
    if (ax->set && x->rank >= 0) {
        char b[SB];
        int a;
        if (!wf__norm_axis(ax->i, x->rank, &a))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)ax->i,
                                  wf__tinfo_str(x, b));
        for (int i = 0; i < x->rank; i++)
            if (i != a) c->out[0].dims[i] = x->dims[i];
    }
    unknown(&c->out[1], WF_I64, 1);
    unknown(&c->out[2], WF_I64, 1);
    unknown(&c->out[3], WF_I64, 1);
    if (x->rank >= 0) {
        int a = 0;
        if (!ax->set) c->out[2].dims[0] = wf__numel(x->rank, x->dims);
        else if (wf__norm_axis(ax->i, x->rank, &a)) c->out[2].dims[0] = x->dims[a];
    }
    return NULL;
}

/* ---- DFT ------------------------------------------------------------------------------------------ */

static wf_status *infer_dft(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_index(c, 1, "dft_length"));
    WF__TRY(need_index(c, 2, "axis"));
    const wf__tinfo *x = &c->in[0];
    int64_t inv = WF__IC_I(c, "inverse"), one = WF__IC_I(c, "onesided");
    if ((inv != 0 && inv != 1) || (one != 0 && one != 1))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "inverse and onesided must be 0 or 1");
    if (x->rank >= 0 && (x->rank < 2 || (x->dims[x->rank - 1] >= 0 && x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2)))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s must be [..., 1] (real) or [..., 2] (complex)",
                              wf__tinfo_str(x, b));
    unknown(&c->out[0], x->dtype, x->rank);
    if (x->rank < 0) return NULL;
    memcpy(c->out[0].dims, x->dims, sizeof x->dims);
    c->out[0].dims[x->rank - 1] = inv && one ? 1 : 2;
    int64_t v = 0;
    int n = 0, ax;
    bool axis_known = true;
    int64_t axis = WF__IC_A(c, "axis")->set ? WF__IC_I(c, "axis") : -2;
    if (present(c, 2)) axis_known = wf__infer_const_ints(c, 2, &v, 1, &n) && n == 1, axis = v;
    if (!axis_known) {
        if (one || present(c, 1))
            for (int i = 0; i < x->rank - 1; i++) c->out[0].dims[i] = -1;
        return NULL;
    }
    if (!wf__norm_axis(axis, x->rank, &ax) || ax == x->rank - 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is not a signal axis of input %s", (long long)axis,
                              wf__tinfo_str(x, b));
    int64_t len = x->dims[ax];
    if (present(c, 1)) len = wf__infer_const_ints(c, 1, &v, 1, &n) && n == 1 ? v : -1;
    else if (inv && one && len >= 0) len = 2 * (len - 1);
    c->out[0].dims[ax] = len < 0 ? -1 : one && !inv ? len / 2 + 1 : len;
    return NULL;
}

/* ---- BitCast -------------------------------------------------------------------------------------- */

static wf_status *infer_bitcast(wf__infer_ctx *c)
{
    wf_dtype to = (wf_dtype)WF__IC_I(c, "to"), from = c->in[0].dtype;
    if (!wf__dtype_valid(to))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'to' is not a valid dtype (%d)", (int)to);
    if (wf_dtype_size(to) != wf_dtype_size(from))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "cannot reinterpret %s (%zu bytes) as %s (%zu bytes)",
                              wf_dtype_name(from), wf_dtype_size(from), wf_dtype_name(to), wf_dtype_size(to));
    c->out[0] = c->in[0];
    c->out[0].dtype = to;
    return NULL;
}

/* Per step, batch row and direction: (I + H) multiply-adds for each of the G gates' H units, and the
 * cell's activations and updates (about 10 operations a unit). Without it the placer saw an LSTM as an
 * elementwise op, and a 0.5 ms layer as a 30 us kernel: too small for the intra-op threads, and then
 * far over its estimate (the slow-region detector in backends/cpu/intra.c). */
static void cost_rnn(const wf__infer_ctx *c, double *flops, double *bytes)
{
    const wf__tinfo *x = &c->in[0], *w = &c->in[1], *r = &c->in[2];
    *flops = 0;
    if (x->rank == 3 && w->rank == 3 && r->rank == 3 && x->dims[0] >= 0 && x->dims[1] >= 0 && w->dims[0] >= 0 &&
        w->dims[1] >= 0 && w->dims[2] >= 0 && r->dims[2] >= 0)
        *flops = (double)x->dims[0] * (double)x->dims[1] * (double)w->dims[0] * (double)w->dims[1] *
                 (2.0 * (double)(w->dims[2] + r->dims[2]) + 10.0);
    *bytes = wf__cost_io_bytes(c);
}

const wf__op_def wf__ops_rnn_image[] = {
    {.name = "RNN", .min_in = 3, .max_in = 6, .n_out = 2, .attrs = {RNN_COMMON_ATTRS}, .infer = infer_rnn,
     .cost = cost_rnn},
    {.name = "GRU", .min_in = 3, .max_in = 6, .n_out = 2,
     .attrs = {RNN_COMMON_ATTRS, {"linear_before_reset", WF_ATTR_INT, .i = 0}}, .infer = infer_rnn, .cost = cost_rnn},
    {.name = "LSTM", .min_in = 3, .max_in = 8, .n_out = 3,
     .attrs = {RNN_COMMON_ATTRS, {"input_forget", WF_ATTR_INT, .i = 0}}, .infer = infer_rnn, .cost = cost_rnn},
    {.name = "GridSample", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"align_corners", WF_ATTR_INT, .i = 0}, {"mode", WF_ATTR_STRING, .s = "linear"},
               {"padding_mode", WF_ATTR_STRING, .s = "zeros"}},
     .infer = infer_grid_sample},
    {.name = "AffineGrid", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {{"align_corners", WF_ATTR_INT, .i = 0}},
     .infer = infer_affine_grid},
    {.name = "RoiAlign", .min_in = 3, .max_in = 3, .n_out = 1,
     .attrs = {{"coordinate_transformation_mode", WF_ATTR_STRING, .s = "half_pixel"},
               {"mode", WF_ATTR_STRING, .s = "avg"}, {"output_height", WF_ATTR_INT, .i = 1},
               {"output_width", WF_ATTR_INT, .i = 1}, {"sampling_ratio", WF_ATTR_INT, .i = 0},
               {"spatial_scale", WF_ATTR_FLOAT, .f = 1.0}},
     .infer = infer_roi_align},
    {.name = "Col2Im", .host_in = 0x6u, .min_in = 3, .max_in = 3, .n_out = 1,
     .attrs = {{"dilations", WF_ATTR_INTS}, {"pads", WF_ATTR_INTS}, {"strides", WF_ATTR_INTS}}, .infer = infer_col2im},
    {.name = "MaxUnpool", .host_in = 1u << 2, .min_in = 2, .max_in = 3, .n_out = 1,
     .attrs = {{"kernel_shape", WF_ATTR_INTS, .required = true}, {"pads", WF_ATTR_INTS}, {"strides", WF_ATTR_INTS}},
     .infer = infer_max_unpool},
    {.name = "NonMaxSuppression", .host_in = 0x1cu, .min_in = 2, .max_in = 5, .n_out = 1,
     .attrs = {{"center_point_box", WF_ATTR_INT, .i = 0}}, .infer = infer_nms},
    {.name = "Unique", .min_in = 1, .max_in = 1, .n_out = 4,
     .attrs = {{"axis", WF_ATTR_INT, .i = 0}, {"sorted", WF_ATTR_INT, .i = 1}}, .infer = infer_unique},
    /* "axis" as an attribute is the opset 17/19 form; opset 20 moved it to input 2, which wins. */
    {.name = "DFT", .host_in = 0x6u, .min_in = 1, .max_in = 3, .n_out = 1,
     .attrs = {{"inverse", WF_ATTR_INT, .i = 0}, {"onesided", WF_ATTR_INT, .i = 0}, {"axis", WF_ATTR_INT, .i = -2}},
     .infer = infer_dft},
    {.name = "BitCast", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"to", WF_ATTR_DTYPE, .required = true}},
     .infer = infer_bitcast, .flags = WF__OP_CHEAP},
    {0},
};
