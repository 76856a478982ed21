/*
 * CPU kernels of ops_rnn_image.c: the recurrent ops (RNN, GRU, LSTM) here, with the helpers that
 * k_rnn.c, k_image_sample.c and k_signal_misc.c share and the group's kernel table. The recurrences
 * run per batch entry so that sequence_lens can stop each one at its own length.
 */
#include "backends/cpu/k_rnn_image.h"
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
    {"RNN", "CPU", WF__DT_FLOATS, 0, k_rnn, NULL, 0},
    {"GRU", "CPU", WF__DT_FLOATS, 0, k_rnn, NULL, 0},
    {"LSTM", "CPU", WF__DT_FLOATS, 0, k_rnn, NULL, 0},
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
