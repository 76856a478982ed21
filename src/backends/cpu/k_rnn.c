/*
 * CPU kernels of ops_rnn_image.c: the recurrent ops (RNN, GRU, LSTM) here, with the helpers that
 * k_rnn.c, k_image_sample.c and k_signal_misc.c share and the group's kernel table. f32 recurrences
 * whose semantics oneDNN's RNN primitives match exactly run there (rnn_dnnl_ok says which), with the
 * primitive built once per node and shape and the weights packed once per content version; all others
 * run the f64 loop, per batch entry so that sequence_lens can stop each one at its own length. Small f32
 * LSTMs that oneDNN would take run weft's own kernel instead (k_rnn_lstm.c says why).
 */
#include "backends/cpu/k_rnn_image.h"
#include "backends/cpu/k_dnnl.h"
#include "ops/kutil_rnn.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <strings.h>

#define SB WF__KO2_SB

/* ---- shared helpers ------------------------------------------------------------------------------ */

wf_status *wf__ko2_zeros(const wf__kctx *k, int64_t n, const char *what, double **buf)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(double);
    *buf = wf__calloc(1, bytes);
    if (!*buf) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s", bytes, what);
    return NULL;
}

wf_status *wf__ko2_widen(const wf__kctx *k, const wf_tensor *t, double **buf)
{
    *buf = NULL;
    if (!t) return NULL;
    WF__TRY(wf__ko2_zeros(k, t->size, "a widened copy of an input", buf));
    wf__convert(t->data, t->dtype, *buf, WF_F64, t->size);
    return NULL;
}

wf_status *wf__ko2_emit(wf__kctx *k, int idx, wf_dtype dtype, int rank, const int64_t *dims, const double *v)
{
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, idx, dtype, rank, dims, &y));
    wf__convert(v, WF_F64, y->data, dtype, y->size);
    return NULL;
}

wf_status *wf__ko2_ints(const wf__kctx *k, int idx, const char *what, int64_t *vals, int max, int *n)
{
    const wf_tensor *t = k->in[idx];
    char b[SB];
    if ((t->dtype != WF_I32 && t->dtype != WF_I64) || t->rank > 1 || t->size > max)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s must be i32 or i64 with rank <= 1 and at most %d values",
                             what, wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, b), max);
    for (int64_t i = 0; i < t->size; i++) vals[i] = wf__load_i64(t->data, t->dtype, i);
    *n = (int)t->size;
    return NULL;
}

/* ---- activations --------------------------------------------------------------------------------- */

typedef struct act {
    int kind; /* WF__KU_ACT_* */
    double alpha, beta;
} act;

static double act_apply(const act *a, double x)
{
    switch (a->kind) {
    case WF__KU_ACT_RELU: return x < 0 ? 0 : x; /* NaN stays NaN */
    case WF__KU_ACT_TANH: return tanh(x);
    case WF__KU_ACT_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case WF__KU_ACT_AFFINE: return a->alpha * x + a->beta;
    case WF__KU_ACT_LEAKY: return x >= 0 ? x : a->alpha * x;
    case WF__KU_ACT_THRESH: return x > a->alpha ? x : 0;
    case WF__KU_ACT_STANH: return a->alpha * tanh(a->beta * x);
    case WF__KU_ACT_HSIGMOID: { double v = a->alpha * x + a->beta; return v < 0 ? 0 : v > 1 ? 1 : v; }
    case WF__KU_ACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
    case WF__KU_ACT_SOFTSIGN: return x / (1 + fabs(x));
    default: return x > 30 ? x : log1p(exp(x));
    }
}

/* `activations` and their alpha/beta, read as src/ops/kutil_rnn.h describes. */
static wf_status *parse_acts(const wf__kctx *k, int per_dir, int nd, const char *const *defaults, act *out)
{
    int kind[WF__KU_MAX_ACTS];
    double al[WF__KU_MAX_ACTS], be[WF__KU_MAX_ACTS];
    char err[256];
    if (!wf__ku_rnn_acts(wf__attr_s(k->op, k->attrs, "activations"), wf__attr_get(k->op, k->attrs, "activation_alpha"),
                         wf__attr_get(k->op, k->attrs, "activation_beta"), per_dir, nd, defaults, k->op->name, kind, al,
                         be, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    for (int i = 0; i < per_dir * nd; i++) {
        out[i].kind = kind[i];
        out[i].alpha = al[i];
        out[i].beta = be[i];
    }
    return NULL;
}

/* ---- RNN, GRU, LSTM ---------------------------------------------------------------------------- */

typedef struct rnn {
    int kind;                    /* gates: 1 RNN, 3 GRU, 4 LSTM */
    int64_t seq, batch, in, hs, nd;
    int layout;
    bool lbr, input_forget, reverse; /* reverse: the one direction runs backwards */
    double clip;                 /* <= 0: none */
    act acts[6];
    const double *x, *w, *r, *b, *p, *h0, *c0;
    const int64_t *lens;
    double *y, *yh, *yc;
} rnn;

static inline double clipv(const rnn *m, double v)
{
    if (m->clip > 0) v = v < -m->clip ? -m->clip : v > m->clip ? m->clip : v;
    return v;
}

static inline double fa(const rnn *m, const act *a, double v) { return act_apply(a, clipv(m, v)); }

/* index of [t][b] in X and of [t][d][b] in Y for the layout */
static inline int64_t x_at(const rnn *m, int64_t t, int64_t b)
{
    return (m->layout ? b * m->seq + t : t * m->batch + b) * m->in;
}
static inline int64_t y_at(const rnn *m, int64_t t, int64_t d, int64_t b)
{
    return (m->layout ? (b * m->seq + t) * m->nd + d : (t * m->nd + d) * m->batch + b) * m->hs;
}
static inline int64_t h_at(const rnn *m, int64_t d, int64_t b)
{
    return (m->layout ? b * m->nd + d : d * m->batch + b) * m->hs;
}

/* One direction d for one batch entry b: gate buffers xw and hr hold G*H values each. */
static void rnn_run(const rnn *m, int64_t d, int64_t b, double *h, double *c, double *xw, double *hr, double *rh)
{
    int64_t G = m->kind, H = m->hs, I = m->in, GH = G * H;
    const double *W = m->w + d * GH * I, *R = m->r + d * GH * H;
    const double *Wb = m->b ? m->b + d * 2 * GH : NULL, *Rb = Wb ? Wb + GH : NULL;
    const double *P = m->p ? m->p + d * 3 * H : NULL;
    const act *A = m->acts + d * (G == 1 ? 1 : G == 3 ? 2 : 3);
    for (int64_t j = 0; j < H; j++) {
        h[j] = m->h0 ? m->h0[h_at(m, d, b) + j] : 0;
        c[j] = m->c0 ? m->c0[h_at(m, d, b) + j] : 0;
    }
    int64_t len = m->lens ? m->lens[b] : m->seq;
    bool rev = m->nd == 2 ? d == 1 : m->reverse;
    for (int64_t s = 0; s < len; s++) {
        int64_t t = rev ? len - 1 - s : s;
        const double *xt = m->x + x_at(m, t, b);
        for (int64_t g = 0; g < GH; g++) {
            double a = Wb ? Wb[g] : 0, e = Rb ? Rb[g] : 0;
            const double *wr = W + g * I, *rr = R + g * H;
            for (int64_t i = 0; i < I; i++) a += xt[i] * wr[i];
            /* GRU's hidden gate without linear_before_reset multiplies h by r first (below) */
            if (!(G == 3 && !m->lbr && g >= 2 * H))
                for (int64_t i = 0; i < H; i++) e += h[i] * rr[i];
            xw[g] = a;
            hr[g] = e;
        }
        if (G == 1) {
            for (int64_t j = 0; j < H; j++) h[j] = fa(m, &A[0], xw[j] + hr[j]);
        } else if (G == 3) {
            /* gates z, r, h */
            for (int64_t j = 0; j < H; j++) {
                xw[j] = fa(m, &A[0], xw[j] + hr[j]);             /* z */
                xw[H + j] = fa(m, &A[0], xw[H + j] + hr[H + j]); /* r */
            }
            if (!m->lbr) {
                for (int64_t i = 0; i < H; i++) rh[i] = xw[H + i] * h[i];
                for (int64_t j = 0; j < H; j++) {
                    const double *rr = R + (2 * H + j) * H;
                    double e = Rb ? Rb[2 * H + j] : 0;
                    for (int64_t i = 0; i < H; i++) e += rh[i] * rr[i];
                    hr[2 * H + j] = e;
                }
            } else {
                for (int64_t j = 0; j < H; j++) hr[2 * H + j] *= xw[H + j];
            }
            for (int64_t j = 0; j < H; j++) {
                double hh = fa(m, &A[1], xw[2 * H + j] + hr[2 * H + j]), z = xw[j];
                h[j] = (1 - z) * hh + z * h[j];
            }
        } else {
            /* gates i, o, f, c; peepholes p_i, p_o, p_f */
            for (int64_t j = 0; j < H; j++) {
                double gi = fa(m, &A[0], xw[j] + hr[j] + (P ? P[j] * c[j] : 0));
                double gf = m->input_forget ? 1 - gi : fa(m, &A[0], xw[2 * H + j] + hr[2 * H + j] + (P ? P[2 * H + j] * c[j] : 0));
                double gc = fa(m, &A[1], xw[3 * H + j] + hr[3 * H + j]);
                c[j] = gf * c[j] + gi * gc;
                double go = fa(m, &A[0], xw[H + j] + hr[H + j] + (P ? P[H + j] * c[j] : 0));
                h[j] = go * fa(m, &A[2], c[j]);
            }
        }
        memcpy(m->y + y_at(m, t, d, b), h, sizeof(double) * (size_t)H);
    }
    memcpy(m->yh + h_at(m, d, b), h, sizeof(double) * (size_t)H);
    if (m->yc) memcpy(m->yc + h_at(m, d, b), c, sizeof(double) * (size_t)H);
}

/* ---- the oneDNN path ----------------------------------------------------------------------------- */

/* What a oneDNN RNN primitive depends on; all of it goes into the node's primitive key. */
typedef struct rnn_dn {
    int64_t kind, seq, batch, in, hs, nd, layout;
    int64_t lbr, reverse, state, peep; /* state: initial states given (LSTM: both h and c, zeros for one absent) */
} rnn_dn;

/* ONNX gate order to oneDNN's: oneDNN's gate g reads ONNX gate perm[g]. LSTM: ONNX i, o, f, c; oneDNN
 * i, f, c, o. GRU: both z (oneDNN's u), r, h (o). LSTM peepholes: ONNX p_i, p_o, p_f; oneDNN i, f, o. */
static const int g_perm_lstm[4] = {0, 2, 3, 1}, g_perm_id[3] = {0, 1, 2}, g_perm_peep[3] = {0, 2, 1};

/*
 * Whether oneDNN computes exactly what the ONNX op asks. It runs the default activations only (Sigmoid
 * and Tanh, fixed in its cells), without clip (oneDNN has none), without LSTM's input_forget (no such
 * cell), with every sequence as long as X (no per-entry length), in f32 (X, W, R and the optional
 * inputs; other dtypes keep the f64 loop), and with no zero-sized dimension. Anything else falls back.
 */
static bool rnn_dnnl_ok(const wf__kctx *k, const rnn *m)
{
    if (m->clip > 0 || m->input_forget || !m->seq || !m->batch || !m->in || !m->hs) return false;
    int per = m->kind == 1 ? 1 : m->kind == 3 ? 2 : 3;
    static const int want[3] = {WF__KU_ACT_SIGMOID, WF__KU_ACT_TANH, WF__KU_ACT_TANH};
    for (int d = 0; d < m->nd; d++)
        for (int i = 0; i < per; i++)
            if (m->acts[d * per + i].kind != (m->kind == 1 ? WF__KU_ACT_TANH : want[i])) return false;
    for (int i = 0; i < k->n_in && i < 8; i++) {
        if (i == 4 || !wf__ko2_has(k, i)) continue;
        if (k->in[i]->dtype != WF_F32) return false;
    }
    if (wf__ko2_has(k, 4)) {
        const wf_tensor *L = k->in[4];
        if (L->dtype != WF_I32 && L->dtype != WF_I64) return false; /* the loop reports it */
        for (int64_t b = 0; b < L->size; b++)
            if (wf__load_i64(L->data, L->dtype, b) != m->seq) return false;
    }
    return true;
}

static wf_status *rnn_dn_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
{
    const rnn_dn *g = arg;
    int64_t G = g->kind, H = g->hs, D = g->nd, Gb = g->lbr ? G + 1 : G;
    dnnl_dims_t xd = {g->seq, g->batch, g->in}, yd = {g->seq, g->batch, D * H}, sd = {1, D, g->batch, H};
    dnnl_dims_t wld = {1, D, g->in, G, H}, wid = {1, D, H, G, H}, bd = {1, D, Gb, H}, pd3 = {1, D, 3, H};
    dnnl_format_tag_t act = g->layout ? dnnl_ntc : dnnl_tnc;
    dnnl_memory_desc_t wlany, wiany;
    dnnl_rnn_desc_t rd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st;
    dnnl_rnn_direction_t dir = D == 2 ? dnnl_bidirectional_concat
                               : g->reverse ? dnnl_unidirectional_right2left : dnnl_unidirectional_left2right;
    const char *what = "RNN memory descriptor";
    /* the destination keeps ONNX's layout 1 (batch, seq, dir * hidden) as ntc; layout 0 bidirectional
     * output goes through tnc and is spread to (seq, dir, batch, hidden) after */
    if ((st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_SRC], 3, xd, dnnl_f32, act)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_DST], 3, yd, dnnl_f32, act)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->rmd[WF__DN_RSTATE], 4, sd, dnnl_f32, dnnl_ldnc)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_WEI], 5, wld, dnnl_f32, dnnl_ldigo)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->rmd[WF__DN_RWI], 5, wid, dnnl_f32, dnnl_ldigo)) ||
        (st = dnnl_memory_desc_init_by_tag(&wlany, 5, wld, dnnl_f32, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&wiany, 5, wid, dnnl_f32, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_BIAS], 4, bd, dnnl_f32, dnnl_ldgo)) ||
        (g->peep && (st = dnnl_memory_desc_init_by_tag(&p->rmd[WF__DN_RPEEP], 4, pd3, dnnl_f32, dnnl_ldgo))))
        goto fail;
    const dnnl_memory_desc_t *si = g->state ? &p->rmd[WF__DN_RSTATE] : NULL, *so = &p->rmd[WF__DN_RSTATE];
    what = "RNN descriptor";
    if (G == 4)
        st = dnnl_lstm_forward_desc_init_v2(&rd, dnnl_forward_inference, dir, &p->md[WF__DN_SRC], si, si, &wlany,
                                            &wiany, g->peep ? &p->rmd[WF__DN_RPEEP] : NULL, &p->md[WF__DN_BIAS],
                                            &p->md[WF__DN_DST], so, so, dnnl_rnn_flags_undef);
    else if (G == 3 && g->lbr)
        st = dnnl_lbr_gru_forward_desc_init(&rd, dnnl_forward_inference, dir, &p->md[WF__DN_SRC], si, &wlany, &wiany,
                                            &p->md[WF__DN_BIAS], &p->md[WF__DN_DST], so, dnnl_rnn_flags_undef);
    else if (G == 3)
        st = dnnl_gru_forward_desc_init(&rd, dnnl_forward_inference, dir, &p->md[WF__DN_SRC], si, &wlany, &wiany,
                                        &p->md[WF__DN_BIAS], &p->md[WF__DN_DST], so, dnnl_rnn_flags_undef);
    else
        st = dnnl_vanilla_rnn_forward_desc_init(&rd, dnnl_forward_inference, dnnl_eltwise_tanh, dir, &p->md[WF__DN_SRC],
                                                si, &wlany, &wiany, &p->md[WF__DN_BIAS], &p->md[WF__DN_DST], so,
                                                dnnl_rnn_flags_undef, 0.0f, 0.0f);
    if (st) goto fail;
    what = "RNN attributes";
    if ((st = wf__dn_attr(WF__ACT_NONE, 0, &attr))) goto fail;
    what = "RNN primitive descriptor";
    if ((st = dnnl_primitive_desc_create(&pd, &rd, attr, eng, NULL))) goto fail;
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->md[WF__DN_WEI_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_WEIGHTS_LAYER);
    p->rmd[WF__DN_RWI_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_WEIGHTS_ITER);
    what = "RNN weight reorder";
    if (!dnnl_memory_desc_equal(&p->md[WF__DN_WEI_PRIM], &p->md[WF__DN_WEI]) &&
        (st = wf__dn_reorder_create(eng, &p->md[WF__DN_WEI], &p->md[WF__DN_WEI_PRIM], &p->wreorder, &p->wscratch)))
        goto fail;
    if (!dnnl_memory_desc_equal(&p->rmd[WF__DN_RWI_PRIM], &p->rmd[WF__DN_RWI]) &&
        (st = wf__dn_reorder_create(eng, &p->rmd[WF__DN_RWI], &p->rmd[WF__DN_RWI_PRIM], &p->ireorder, &p->iscratch)))
        goto fail;
    what = "RNN primitive";
    st = dnnl_primitive_create(&p->prim, pd);
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st == dnnl_success ? NULL : wf__dn_fail(k, st, what);
}

static size_t al64(size_t n) { return (n + WF__ALIGN - 1) / WF__ALIGN * WF__ALIGN; }

/* Byte offsets of the packed parts in a weight buffer: layer weights, recurrent weights, bias, peepholes. */
static void rnn_pack_offsets(const wf__dn_prim *p, size_t off[5])
{
    off[0] = 0;
    off[1] = al64(dnnl_memory_desc_get_size(&p->md[WF__DN_WEI_PRIM]));
    off[2] = off[1] + al64(dnnl_memory_desc_get_size(&p->rmd[WF__DN_RWI_PRIM]));
    off[3] = off[2] + al64(dnnl_memory_desc_get_size(&p->md[WF__DN_BIAS]));
    off[4] = off[3] + al64(dnnl_memory_desc_get_size(&p->rmd[WF__DN_RPEEP]));
}

/* ONNX M[d][gate * H + o][i] (gates in ONNX order) to oneDNN's plain ldigo [d][i][g][o] with its gate order. */
static void rnn_to_ldigo(const float *M, float *out, int64_t D, int64_t G, int64_t H, int64_t I, const int *perm)
{
    for (int64_t d = 0; d < D; d++)
        for (int64_t i = 0; i < I; i++)
            for (int64_t g = 0; g < G; g++) {
                const float *src = M + ((d * G + perm[g]) * H) * I + i;
                float *dst = out + ((d * I + i) * G + g) * H;
                for (int64_t o = 0; o < H; o++) dst[o] = src[o * I];
            }
}

/* Packs W, R, B, P (ONNX layouts) into buf (rnn_pack_offsets) through the run context r's reorder slots. */
static wf_status *rnn_pack(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, const void *arg, const float *const w[4], char *buf)
{
    const rnn_dn *g = arg;
    const float *W = w[0], *R = w[1], *B = w[2], *P = w[3];
    int64_t G = g->kind, H = g->hs, D = g->nd, I = g->in, Gb = g->lbr ? G + 1 : G;
    const int *perm = G == 4 ? g_perm_lstm : g_perm_id;
    size_t off[5];
    rnn_pack_offsets(p, off);
    int64_t big = D * G * H * (I > H ? I : H);
    float *tmp = wf__aligned_alloc((size_t)big * sizeof(float), WF__ALIGN);
    if (!tmp)
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes to pack RNN weights on CPU:0",
                             (size_t)big * sizeof(float));
    wf_status *s = NULL;
    rnn_to_ldigo(W, tmp, D, G, H, I, perm);
    if (p->wreorder)
        s = wf__dn_reorder(k, r, WF__DN_SLOT_WREORDER, p->wreorder, &p->md[WF__DN_WEI], tmp, &p->md[WF__DN_WEI_PRIM],
                           buf + off[0], &p->wscratch);
    else
        memcpy(buf + off[0], tmp, (size_t)(D * I * G * H) * sizeof(float));
    if (!s) {
        rnn_to_ldigo(R, tmp, D, G, H, H, perm);
        if (p->ireorder)
            s = wf__dn_reorder(k, r, WF__DN_SLOT_SREORDER, p->ireorder, &p->rmd[WF__DN_RWI], tmp,
                               &p->rmd[WF__DN_RWI_PRIM], buf + off[1], &p->iscratch);
        else
            memcpy(buf + off[1], tmp, (size_t)(D * H * G * H) * sizeof(float));
    }
    wf__aligned_free(tmp);
    if (s) return s;
    /* one bias per gate, Wb + Rb; the linear-before-reset GRU keeps h's recurrent bias apart (a fourth
     * gate, inside r * (R h + Rb)) */
    float *bias = (float *)(buf + off[2]);
    for (int64_t d = 0; d < D; d++)
        for (int64_t gg = 0; gg < Gb; gg++)
            for (int64_t j = 0; j < H; j++) {
                const float *wb = B ? B + d * 2 * G * H : NULL, *rb = B ? wb + G * H : NULL;
                float v = 0;
                if (B && g->lbr && gg >= 2) v = gg == 2 ? wb[2 * H + j] : rb[2 * H + j];
                else if (B) v = wb[perm[gg] * H + j] + rb[perm[gg] * H + j];
                bias[(d * Gb + gg) * H + j] = v;
            }
    if (g->peep) {
        float *pp = (float *)(buf + off[3]);
        for (int64_t d = 0; d < D; d++)
            for (int64_t gg = 0; gg < 3; gg++)
                for (int64_t j = 0; j < H; j++) pp[(d * 3 + gg) * H + j] = P ? P[d * 3 * H + g_perm_peep[gg] * H + j] : 0;
    }
    wf__dn_count_wpack();
    return NULL;
}

/* The packed weights, as conv_weights (k_dnnl_conv.c) keeps them: when W, R and the given B and P all
 * carry a content version (wf_tensor.version), packed once per set of versions into the node's cache;
 * otherwise (or while another run reads a stale cache) packed into this run's context. *cached: the
 * caller must call wf__rnn_weights_done. k_rnn_lstm.c keeps its own packing in it too. */
wf_status *wf__rnn_weights(wf__kctx *k, wf__dn_prim *p, wf__dn_run *r, const wf_tensor *const *t, size_t bytes,
                           wf__rnn_pack_fn pack, const void *arg, char **out, bool *cached)
{
    *out = NULL;
    *cached = false;
    uint64_t v[4];
    bool stamped = true;
    for (int i = 0; i < 4; i++) {
        v[i] = t[i] ? t[i]->version : 0;
        if (t[i] && !v[i]) stamped = false;
    }
    const float *w[4] = {t[0]->data, t[1]->data, t[2] ? t[2]->data : NULL, t[3] ? t[3]->data : NULL};
    wf_status *s = NULL;
    if (stamped) {
        pthread_mutex_lock(&p->lock);
        if (p->wcache && p->wver && !memcmp(p->wvers, v, sizeof v)) {
            p->wusers++;
            *out = p->wcache;
            *cached = true;
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        if (!p->wusers) {
            p->wver = 0;
            if (!p->wcache) p->wcache = wf__aligned_alloc(bytes, WF__ALIGN);
            if (!p->wcache) {
                pthread_mutex_unlock(&p->lock);
                return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for packed RNN weights on CPU:0",
                                     bytes);
            }
            s = pack(k, p, r, arg, w, p->wcache);
            if (!s) {
                p->wver = 1;
                memcpy(p->wvers, v, sizeof v);
                p->wusers++;
                *out = p->wcache;
                *cached = true;
            }
            pthread_mutex_unlock(&p->lock);
            return s;
        }
        pthread_mutex_unlock(&p->lock);
    }
    WF__TRY(wf__dn_run_buf(k, r, WF__DN_BUF_WEI, bytes, (void **)out));
    return pack(k, p, r, arg, w, *out);
}

void wf__rnn_weights_done(wf__dn_prim *p, bool cached)
{
    if (!cached) return;
    pthread_mutex_lock(&p->lock);
    p->wusers--;
    pthread_mutex_unlock(&p->lock);
}

/* [d][b] state rows of ONNX layout 1 ([b][d][H]) to and from oneDNN's ldnc ([d][b][H]) */
static void rnn_state_swap(const float *from, float *to, int64_t D, int64_t N, int64_t H, bool to_ldnc)
{
    for (int64_t d = 0; d < D; d++)
        for (int64_t b = 0; b < N; b++) {
            int64_t l = (d * N + b) * H, o = (b * D + d) * H;
            memcpy(to + (to_ldnc ? l : o), from + (to_ldnc ? o : l), sizeof(float) * (size_t)H);
        }
}

static wf_status *rnn_dnnl(wf__kctx *k, const rnn *m)
{
    int64_t G = m->kind, H = m->hs, D = m->nd, N = m->batch, T = m->seq;
    bool lstm = G == 4;
    rnn_dn g = {G, T, N, m->in, H, D, m->layout, m->lbr, m->reverse,
                wf__ko2_has(k, 5) || (lstm && wf__ko2_has(k, 6)), lstm && wf__ko2_has(k, 7)};
    int64_t key[WF__DN_KEY_MAX];
    int nk = 0;
    key[nk++] = 'R';
    memcpy(&key[nk], &g, sizeof g);
    nk += (int)(sizeof g / sizeof(int64_t));
    int64_t hw[3] = {D, N, H}, hwl[3] = {N, D, H}, ydims[4] = {T, D, N, H}, ydl[4] = {N, T, D, H};
    wf_tensor *Y = NULL, *Yh = NULL, *Yc = NULL;
    wf__dn_prim *p;
    WF__TRY(wf__dn_acquire(k, key, nk, rnn_dn_build, &g, &p));
    wf__dn_run *r = NULL;
    char *wbuf = NULL;
    bool wcached = false;
    wf_status *s = wf__kctx_output(k, 0, WF_F32, 4, m->layout ? ydl : ydims, &Y);
    if (!s && k->n_out > 1) s = wf__kctx_output(k, 1, WF_F32, 3, m->layout ? hwl : hw, &Yh);
    if (!s && lstm && k->n_out > 2) s = wf__kctx_output(k, 2, WF_F32, 3, m->layout ? hwl : hw, &Yc);
    if (s) goto done;
    const wf_tensor *wt[4] = {k->in[1], k->in[2], wf__ko2_has(k, 3) ? k->in[3] : NULL,
                              g.peep ? k->in[7] : NULL};
    size_t off[5];
    rnn_pack_offsets(p, off);
    if ((s = wf__dn_run_get(k, p, &r)) || (s = wf__rnn_weights(k, p, r, wt, off[4], rnn_pack, &g, &wbuf, &wcached)))
        goto done;
    /* run buffer: initial h and c, final h and c in ldnc where the outputs cannot take them directly, and
     * the tnc output of a bidirectional layout-0 run */
    int64_t dnh = D * N * H;
    bool spread = D == 2 && !m->layout;
    float *abuf = NULL;
    if ((s = wf__dn_run_buf(k, r, WF__DN_BUF_ACT, sizeof(float) * (size_t)(4 * dnh + (spread ? T * N * D * H : 0)),
                            (void **)&abuf)))
        goto done;
    float *hin = abuf, *cin = abuf + dnh, *hout = abuf + 2 * dnh, *cout = abuf + 3 * dnh, *ybuf = abuf + 4 * dnh;
    if (g.state) {
        const wf_tensor *h0 = wf__ko2_has(k, 5) ? k->in[5] : NULL, *c0 = lstm && wf__ko2_has(k, 6) ? k->in[6] : NULL;
        const wf_tensor *st[2] = {h0, c0};
        float *bufs[2] = {hin, cin};
        for (int i = 0; i < (lstm ? 2 : 1); i++) {
            if (!st[i]) memset(bufs[i], 0, sizeof(float) * (size_t)dnh);
            else if (m->layout) rnn_state_swap(st[i]->data, bufs[i], D, N, H, true);
            else bufs[i] = st[i]->data;
        }
        hin = bufs[0], cin = bufs[1];
    }
    if (Yh && !m->layout) hout = Yh->data;
    if (Yc && !m->layout) cout = Yc->data;
    int ids[WF__DN_MAX_ARGS];
    const dnnl_memory_desc_t *mds[WF__DN_MAX_ARGS];
    void *ptrs[WF__DN_MAX_ARGS];
    int n = 0;
#define ARG(ID, MD, PTR) (ids[n] = (ID), mds[n] = (MD), ptrs[n] = (void *)(PTR), n++)
    ARG(DNNL_ARG_SRC_LAYER, &p->md[WF__DN_SRC], k->in[0]->data);
    ARG(DNNL_ARG_WEIGHTS_LAYER, &p->md[WF__DN_WEI_PRIM], wbuf + off[0]);
    ARG(DNNL_ARG_WEIGHTS_ITER, &p->rmd[WF__DN_RWI_PRIM], wbuf + off[1]);
    ARG(DNNL_ARG_BIAS, &p->md[WF__DN_BIAS], wbuf + off[2]);
    ARG(DNNL_ARG_DST_LAYER, &p->md[WF__DN_DST], spread ? ybuf : (float *)Y->data);
    ARG(DNNL_ARG_DST_ITER, &p->rmd[WF__DN_RSTATE], hout);
    if (lstm) ARG(DNNL_ARG_DST_ITER_C, &p->rmd[WF__DN_RSTATE], cout);
    if (g.state) ARG(DNNL_ARG_SRC_ITER, &p->rmd[WF__DN_RSTATE], hin);
    if (g.state && lstm) ARG(DNNL_ARG_SRC_ITER_C, &p->rmd[WF__DN_RSTATE], cin);
    if (g.peep) ARG(DNNL_ARG_WEIGHTS_PEEPHOLE, &p->rmd[WF__DN_RPEEP], wbuf + off[3]);
#undef ARG
    if ((s = wf__dn_exec(k, r, WF__DN_SLOT_PRIM, p->prim, n, ids, mds, ptrs, &p->scratch))) goto done;
    if (spread) {
        float *y = Y->data;
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++)
                for (int64_t b = 0; b < N; b++)
                    memcpy(y + ((t * D + d) * N + b) * H, ybuf + (t * N + b) * D * H + d * H, sizeof(float) * (size_t)H);
    }
    if (Yh && m->layout) rnn_state_swap(hout, Yh->data, D, N, H, false);
    if (Yc && m->layout) rnn_state_swap(cout, Yc->data, D, N, H, false);
done:
    if (wbuf) wf__rnn_weights_done(p, wcached);
    wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    return s;
}

static wf_status *rnn_check(const wf__kctx *k, const rnn *m, int idx, const char *what, int rank, const int64_t *want)
{
    const wf_tensor *t = k->in[idx];
    char b0[SB], b1[SB], b2[SB];
    bool ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == want[i];
    if (!ok)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be %s for X %s", what,
                             wf__shape_str(t->rank, t->dims, b0), wf__shape_str(rank, want, b1),
                             wf__shape_str(k->in[0]->rank, k->in[0]->dims, b2));
    (void)m;
    return NULL;
}

static wf_status *k_rnn(wf__kctx *k)
{
    static const char *const d_rnn[] = {"Tanh"}, *const d_gru[] = {"Sigmoid", "Tanh"},
                             *const d_lstm[] = {"Sigmoid", "Tanh", "Tanh"};
    const wf_tensor *X = k->in[0], *W = k->in[1], *R = k->in[2];
    char b0[SB], b1[SB];
    rnn m = {0};
    m.kind = !strcmp(k->op->name, "LSTM") ? 4 : !strcmp(k->op->name, "GRU") ? 3 : 1;
    m.layout = (int)wf__attr_i(k->op, k->attrs, "layout");
    const char *dir = wf__attr_s(k->op, k->attrs, "direction");
    m.nd = !strcmp(dir, "bidirectional") ? 2 : 1;
    bool reverse = !strcmp(dir, "reverse");
    if (X->rank != 3 || W->rank != 3 || R->rank != 3 || W->dims[0] != m.nd || R->dims[2] <= 0 ||
        W->dims[1] != m.kind * R->dims[2] || W->dims[2] != X->dims[2])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s and W %s do not fit a %s with direction '%s'",
                             wf__shape_str(X->rank, X->dims, b0), wf__shape_str(W->rank, W->dims, b1), k->op->name, dir);
    m.seq = X->dims[m.layout ? 1 : 0];
    m.batch = X->dims[m.layout ? 0 : 1];
    m.in = X->dims[2];
    m.hs = R->dims[2];
    const wf__attr *hsa = wf__attr_get(k->op, k->attrs, "hidden_size");
    if (hsa->set && hsa->i != m.hs)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "hidden_size %" PRId64 " does not match R %s", hsa->i,
                             wf__shape_str(R->rank, R->dims, b0));
    int64_t G = m.kind, H = m.hs, nd = m.nd;
    int64_t rw[3] = {nd, G * H, H}, bw[2] = {nd, 2 * G * H}, pw[2] = {nd, 3 * H};
    int64_t hw[3] = {nd, m.batch, H}, hwl[3] = {m.batch, nd, H}, lw[1] = {m.batch};
    WF__TRY(rnn_check(k, &m, 2, "R", 3, rw));
    if (wf__ko2_has(k, 3)) WF__TRY(rnn_check(k, &m, 3, "B", 2, bw));
    if (wf__ko2_has(k, 4)) WF__TRY(rnn_check(k, &m, 4, "sequence_lens", 1, lw));
    if (wf__ko2_has(k, 5)) WF__TRY(rnn_check(k, &m, 5, "initial_h", 3, m.layout ? hwl : hw));
    if (G == 4 && wf__ko2_has(k, 6)) WF__TRY(rnn_check(k, &m, 6, "initial_c", 3, m.layout ? hwl : hw));
    if (G == 4 && wf__ko2_has(k, 7)) WF__TRY(rnn_check(k, &m, 7, "P", 2, pw));
    const wf__attr *clip = wf__attr_get(k->op, k->attrs, "clip");
    m.clip = clip->set ? clip->f : 0;
    if (G == 3) m.lbr = wf__attr_i(k->op, k->attrs, "linear_before_reset") != 0;
    if (G == 4) m.input_forget = wf__attr_i(k->op, k->attrs, "input_forget") != 0;
    WF__TRY(parse_acts(k, G == 1 ? 1 : G == 3 ? 2 : 3, (int)nd, G == 1 ? d_rnn : G == 3 ? d_gru : d_lstm, m.acts));
    m.reverse = reverse;
    if (X->dtype == WF_F32 && rnn_dnnl_ok(k, &m)) {
        /* small LSTMs: weft's own kernel (k_rnn_lstm.c); a shape or format this oneDNN build has no
         * implementation for runs the loop below */
        wf__lstm_dims ld = {m.seq, m.batch, m.in, m.hs, m.nd, m.layout, m.reverse};
        wf_status *ds = G == 4 && wf__lstm_own_takes(&ld) ? wf__lstm_own(k, &ld) : rnn_dnnl(k, &m);
        if (!ds || wf_status_code(ds) != WF_UNIMPLEMENTED) return ds;
        wf_status_free(ds);
    }

    int64_t ydims[4] = {m.seq, nd, m.batch, H}, ydl[4] = {m.batch, m.seq, nd, H};
    int64_t *lens = NULL;
    double *x = NULL, *w = NULL, *r = NULL, *bb = NULL, *p = NULL, *h0 = NULL, *c0 = NULL, *y = NULL, *yh = NULL,
           *yc = NULL, *scratch = NULL;
    wf_status *s = NULL;
    if (wf__ko2_has(k, 4)) {
        const wf_tensor *L = k->in[4];
        if (L->dtype != WF_I32 && L->dtype != WF_I64) {
            s = wf__kctx_fail(k, WF_INVALID_ARGUMENT, "sequence_lens must be i32 or i64, not %s", wf_dtype_name(L->dtype));
            goto done;
        }
        lens = wf__malloc(sizeof(int64_t) * (size_t)(m.batch ? m.batch : 1));
        if (!lens) {
            s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for sequence_lens");
            goto done;
        }
        for (int64_t i = 0; i < m.batch; i++) {
            lens[i] = wf__load_i64(L->data, L->dtype, i);
            if (lens[i] < 0 || lens[i] > m.seq) {
                s = wf__kctx_fail(k, WF_INVALID_ARGUMENT, "sequence_lens[%" PRId64 "] = %" PRId64 " is outside [0, %" PRId64 "]",
                                  i, lens[i], m.seq);
                goto done;
            }
        }
    }
    if ((s = wf__ko2_widen(k, X, &x)) || (s = wf__ko2_widen(k, W, &w)) || (s = wf__ko2_widen(k, R, &r)) ||
        (s = wf__ko2_widen(k, wf__ko2_has(k, 3) ? k->in[3] : NULL, &bb)) ||
        (s = wf__ko2_widen(k, wf__ko2_has(k, 5) ? k->in[5] : NULL, &h0)) ||
        (G == 4 && (s = wf__ko2_widen(k, wf__ko2_has(k, 6) ? k->in[6] : NULL, &c0))) ||
        (G == 4 && (s = wf__ko2_widen(k, wf__ko2_has(k, 7) ? k->in[7] : NULL, &p))) ||
        (s = wf__ko2_zeros(k, m.seq * nd * m.batch * H, "Y", &y)) ||
        (s = wf__ko2_zeros(k, nd * m.batch * H, "Y_h", &yh)) ||
        (G == 4 && (s = wf__ko2_zeros(k, nd * m.batch * H, "Y_c", &yc))) ||
        (s = wf__ko2_zeros(k, 2 * G * H + 3 * H, "gate scratch", &scratch)))
        goto done;
    m.x = x, m.w = w, m.r = r, m.b = bb, m.p = p, m.h0 = h0, m.c0 = c0, m.lens = lens, m.y = y, m.yh = yh, m.yc = yc;
    for (int64_t d = 0; d < nd; d++)
        for (int64_t b = 0; b < m.batch; b++)
            rnn_run(&m, d, b, scratch + 2 * G * H, scratch + 2 * G * H + H, scratch, scratch + G * H,
                    scratch + 2 * G * H + 2 * H);
    if ((s = wf__ko2_emit(k, 0, X->dtype, 4, m.layout ? ydl : ydims, y))) goto done;
    if (k->n_out > 1 && (s = wf__ko2_emit(k, 1, X->dtype, 3, m.layout ? hwl : hw, yh))) goto done;
    if (k->n_out > 2 && (s = wf__ko2_emit(k, 2, X->dtype, 3, m.layout ? hwl : hw, yc))) goto done;
done:
    wf__free(lens);
    wf__free(x), wf__free(w), wf__free(r), wf__free(bb), wf__free(p), wf__free(h0), wf__free(c0);
    wf__free(y), wf__free(yh), wf__free(yc), wf__free(scratch);
    return s;
}

const wf__kernel_def wf__cpu_kernels_rnn_image[] = {
    {"RNN", "CPU", WF__DT_FLOATS, 0, k_rnn, wf__dn_free_state, 0},
    {"GRU", "CPU", WF__DT_FLOATS, 0, k_rnn, wf__dn_free_state, 0},
    {"LSTM", "CPU", WF__DT_FLOATS, 0, k_rnn, wf__dn_free_state, 0},
    {"GridSample", "CPU", WF__DT_FLOATS, 0, wf__k_grid_sample, NULL, 0},
    {"AffineGrid", "CPU", WF__DT_FLOATS, 0, wf__k_affine_grid, NULL, 0},
    {"RoiAlign", "CPU", WF__DT_FLOATS, 0, wf__k_roi_align, NULL, 0},
    {"Col2Im", "CPU", WF__DT_NUMERIC, 0, wf__k_col2im, NULL, 0},
    {"MaxUnpool", "CPU", WF__DT_NUMERIC, 0, wf__k_max_unpool, NULL, 0},
    {"NonMaxSuppression", "CPU", WF__DT_FLOATS, 0, wf__k_nms, NULL, 0},
    {"Unique", "CPU", WF__DT_ALL, 0, wf__k_unique, NULL, 0},
    {"DFT", "CPU", WF__DT_FLOATS, 0, wf__k_dft, NULL, 0},
    {"BitCast", "CPU", WF__DT_ALL, 0, wf__k_bitcast, NULL, 0},
    {NULL, NULL, 0, 0, NULL, NULL, 0},
};
