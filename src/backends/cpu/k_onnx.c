/*
 * CPU kernels of ops_onnx.c: the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), LpPool,
 * CenterCropPad and the window generators, the helpers the k_onnx*.c files share, and the group's
 * kernel table. Attention and RotaryEmbedding are in k_onnx_attn.c, the quantisation ops (with
 * ConvInteger and QLinearConv) in k_onnx_quant.c.
 */
#include "backends/cpu/k_onnx.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define SB WF__KO_SB

wf_status *wf__ko_alloc(const wf__kctx *k, int64_t n, const char *what, double **out)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(double);
    *out = wf__calloc(1, bytes);
    if (!*out) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s", bytes, what);
    return NULL;
}

wf_status *wf__ko_widen(const wf__kctx *k, const wf_tensor *t, double **out)
{
    WF__TRY(wf__ko_alloc(k, t->size, "a widened copy of an input", out));
    wf__convert(t->data, t->dtype, *out, WF_F64, t->size);
    return NULL;
}

/* ---- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ------------------------------------------ */

/* Both losses: SCE runs log-softmax over C first (and may return it), then both gather -x[n, t, d]
 * weighted by weight[t] (0 for ignore_index) and reduce; "mean" divides by the sum of those weights. */
static wf_status *loss(wf__kctx *k, bool softmax)
{
    char b0[SB], b1[SB];
    const wf_tensor *x = k->in[0], *t = k->in[1], *w = wf__ko_has(k, 2) ? k->in[2] : NULL;
    const wf__attr *ia = wf__attr_get(k->op, k->attrs, "ignore_index");
    const char *red = wf__attr_s(k->op, k->attrs, "reduction");
    if (x->rank < 2 || t->rank != x->rank - 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must have input %s's shape without dim 1",
                             wf__shape_str(t->rank, t->dims, b1), wf__shape_str(x->rank, x->dims, b0));
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] != x->dims[d ? d + 1 : 0])
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must have input %s's shape without dim 1",
                                 wf__shape_str(t->rank, t->dims, b1), wf__shape_str(x->rank, x->dims, b0));
    int64_t N = x->dims[0], C = x->dims[1], D = wf__numel(x->rank - 2, x->dims + 2);
    if (w && (w->rank != 1 || w->dims[0] != C))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "weight %s must have one value per class (%" PRId64 ")",
                             wf__shape_str(w->rank, w->dims, b1), C);
    wf_dtype dt = x->dtype;
    double *lp = NULL, *wv = NULL, *l = NULL;
    wf_status *s = wf__ko_widen(k, x, &lp);
    if (!s && w) s = wf__ko_widen(k, w, &wv);
    if (!s) s = wf__ko_alloc(k, N * D, "the per-element loss", &l);
    if (s) goto done;
    if (softmax) {
        /* log p = x - max - log(sum(exp(x - max))) over C, for each (n, d) */
        for (int64_t n = 0; n < N; n++)
            for (int64_t d = 0; d < D; d++) {
                double *p = lp + n * C * D + d, m = -INFINITY, sum = 0;
                for (int64_t c = 0; c < C; c++) m = p[c * D] > m || isnan(p[c * D]) ? p[c * D] : m;
                for (int64_t c = 0; c < C; c++) sum += exp(p[c * D] - m);
                double ls = log(sum);
                for (int64_t c = 0; c < C; c++) p[c * D] = wf__ko_round(p[c * D] - m - ls, dt);
            }
        if (k->n_out > 1) {
            wf_tensor *y;
            if ((s = wf__kctx_output(k, 1, dt, x->rank, x->dims, &y))) goto done;
            wf__convert(lp, WF_F64, y->data, dt, x->size);
        }
    }
    double wsum = 0, sum = 0;
    for (int64_t i = 0; i < N * D; i++) {
        int64_t tv = wf__load_i64(t->data, t->dtype, i), n = i / (D ? D : 1), d = i % (D ? D : 1);
        if (ia->set && tv == ia->i) continue;
        if (tv < 0 || tv >= C) {
            s = wf__kctx_fail(k, WF_INVALID_ARGUMENT, "target %" PRId64 " at position %" PRId64
                              " is not a class in [0, %" PRId64 ") nor ignore_index", tv, i, C);
            goto done;
        }
        double wt = wv ? wv[tv] : 1.0;
        l[i] = wf__ko_round(-lp[(n * C + tv) * D + d] * wt, dt);
        wsum += wt;
        sum += l[i];
    }
    wf_tensor *y;
    if (!strcmp(red, "none")) {
        if (!(s = wf__kctx_output(k, 0, dt, t->rank, t->dims, &y))) wf__convert(l, WF_F64, y->data, dt, N * D);
    } else if (!(s = wf__kctx_output(k, 0, dt, 0, NULL, &y))) {
        wf__store_f64(y->data, dt, 0, !strcmp(red, "sum") ? sum : sum / wsum);
    }
done:
    wf__free(lp);
    wf__free(wv);
    wf__free(l);
    return s;
}

static wf_status *k_nll(wf__kctx *k) { return loss(k, false); }
static wf_status *k_sce(wf__kctx *k) { return loss(k, true); }

/* ---- LpPool ------------------------------------------------------------------------------------------ */

typedef struct {
    int ns;                        /* spatial dims */
    int64_t in[WF_MAX_RANK], out[WF_MAX_RANK], k[WF_MAX_RANK], s[WF_MAX_RANK], d[WF_MAX_RANK],
        pb[WF_MAX_RANK];           /* begin pads */
    int64_t in_plane, out_plane;
    const double *x;
    double *y;
    double p;
} lp_job;

static void lp_range(void *arg, int64_t b, int64_t e)
{
    const lp_job *j = arg;
    int64_t win = 1;
    for (int i = 0; i < j->ns; i++) win *= j->k[i];
    for (int64_t o = b; o < e; o++) {
        int64_t plane = o / j->out_plane, r = o % j->out_plane, oc[WF_MAX_RANK];
        for (int i = j->ns - 1; i >= 0; i--) {
            oc[i] = r % j->out[i];
            r /= j->out[i];
        }
        const double *xp = j->x + plane * j->in_plane;
        double acc = 0;
        for (int64_t w = 0; w < win; w++) {
            int64_t ww = w, off = 0;
            bool inside = true;
            for (int i = j->ns - 1; i >= 0 && inside; i--) {
                int64_t ki = ww % j->k[i];
                ww /= j->k[i];
                int64_t c = oc[i] * j->s[i] - j->pb[i] + ki * j->d[i];
                if (c < 0 || c >= j->in[i]) inside = false;
                int64_t stride = 1;
                for (int q = i + 1; q < j->ns; q++) stride *= j->in[q];
                off += c * stride;
            }
            if (!inside) continue;
            double a = fabs(xp[off]);
            acc += j->p == 2 ? a * a : j->p == 1 ? a : pow(a, j->p);
        }
        j->y[o] = j->p == 2 ? sqrt(acc) : j->p == 1 ? acc : pow(acc, 1.0 / j->p);
    }
}

static wf_status *k_lppool(wf__kctx *k)
{
    char b[SB];
    const wf_tensor *x = k->in[0];
    const wf__attr *ks = wf__attr_get(k->op, k->attrs, "kernel_shape"), *st = wf__attr_get(k->op, k->attrs, "strides"),
                   *dl = wf__attr_get(k->op, k->attrs, "dilations"), *pd = wf__attr_get(k->op, k->attrs, "pads");
    const char *ap = wf__attr_s(k->op, k->attrs, "auto_pad");
    bool ceil_mode = wf__attr_i(k->op, k->attrs, "ceil_mode") != 0;
    lp_job j = {.ns = x->rank - 2, .p = (double)wf__attr_i(k->op, k->attrs, "p")};
    if (j.ns < 1 || ks->n != j.ns)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s does not fit kernel_shape (%d values)",
                             wf__shape_str(x->rank, x->dims, b), ks->n);
    int64_t yd[WF_MAX_RANK] = {x->dims[0], x->dims[1]};
    j.in_plane = j.out_plane = 1;
    for (int i = 0; i < j.ns; i++) {
        j.in[i] = x->dims[i + 2];
        j.k[i] = ks->ints[i];
        j.s[i] = st->n ? st->ints[i] : 1;
        j.d[i] = dl->n ? dl->ints[i] : 1;
        int64_t ext = (j.k[i] - 1) * j.d[i] + 1;
        if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            j.out[i] = (j.in[i] + j.s[i] - 1) / j.s[i];
            int64_t tot = (j.out[i] - 1) * j.s[i] + ext - j.in[i];
            if (tot < 0) tot = 0;
            j.pb[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
        } else {
            bool valid = !strcmp(ap, "VALID");
            j.pb[i] = valid || !pd->n ? 0 : pd->ints[i];
            int64_t span = j.in[i] + (valid || !pd->n ? 0 : pd->ints[i] + pd->ints[i + j.ns]) - ext;
            if (span < 0)
                return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "kernel is larger than padded input %s",
                                     wf__shape_str(x->rank, x->dims, b));
            j.out[i] = (ceil_mode ? (span + j.s[i] - 1) / j.s[i] : span / j.s[i]) + 1;
            if (ceil_mode && (j.out[i] - 1) * j.s[i] >= j.in[i] + j.pb[i]) j.out[i]--;
        }
        yd[i + 2] = j.out[i];
        j.in_plane *= j.in[i];
        j.out_plane *= j.out[i];
    }
    double *xv = NULL, *yv = NULL;
    wf_status *s = wf__ko_widen(k, x, &xv);
    int64_t n_out = x->dims[0] * x->dims[1] * j.out_plane;
    if (!s) s = wf__ko_alloc(k, n_out, "LpPool's output", &yv);
    wf_tensor *y;
    if (!s) s = wf__kctx_output(k, 0, x->dtype, x->rank, yd, &y);
    if (!s) {
        j.x = xv;
        j.y = yv;
        wf__parallel_for(k, n_out, 256, lp_range, &j);
        wf__convert(yv, WF_F64, y->data, x->dtype, n_out);
    }
    wf__free(xv);
    wf__free(yv);
    return s;
}

/* ---- CenterCropPad ---------------------------------------------------------------------------------- */

static wf_status *k_center_crop_pad(wf__kctx *k)
{
    char b0[SB], b1[SB];
    const wf_tensor *x = k->in[0], *sh = k->in[1];
    const wf__attr *ax = wf__attr_get(k->op, k->attrs, "axes");
    int na = ax->n ? ax->n : x->rank;
    if (sh->rank != 1 || sh->dims[0] != na)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shape %s must have one value per axis (%d) of input %s",
                             wf__shape_str(sh->rank, sh->dims, b1), na, wf__shape_str(x->rank, x->dims, b0));
    int64_t yd[WF_MAX_RANK], shift[WF_MAX_RANK] = {0}; /* input coord = output coord + shift */
    memcpy(yd, x->dims, sizeof(int64_t) * (size_t)x->rank);
    for (int i = 0; i < na; i++) {
        int a;
        if (!ax->n) a = i;
        else if (!wf__norm_axis(ax->ints[i], x->rank, &a))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", ax->ints[i],
                                 wf__shape_str(x->rank, x->dims, b0));
        int64_t v = wf__load_i64(sh->data, sh->dtype, i);
        if (v < 0) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "shape value %" PRId64 " must be >= 0", v);
        /* Cropping takes the centre, padding centres the input; an odd difference puts the extra
         * element at the end. */
        shift[a] = v <= x->dims[a] ? (x->dims[a] - v) / 2 : -((v - x->dims[a]) / 2);
        yd[a] = v;
    }
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, yd, &y));
    size_t es = wf_dtype_size(x->dtype);
    memset(y->data, 0, y->bytes);
    int64_t xs[WF_MAX_RANK];
    wf__strides(x->rank, x->dims, xs);
    for (int64_t o = 0; o < y->size; o++) {
        int64_t r = o, off = 0;
        bool inside = true;
        for (int d = x->rank - 1; d >= 0; d--) {
            int64_t c = r % yd[d] + shift[d];
            r /= yd[d];
            if (c < 0 || c >= x->dims[d]) inside = false;
            off += c * xs[d];
        }
        if (inside) memcpy((char *)y->data + (size_t)o * es, (const char *)x->data + (size_t)off * es, es);
    }
    return NULL;
}

/* ---- window functions ----------------------------------------------------------------------------- */

enum { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN };

static wf_status *window(wf__kctx *k, int kind)
{
    const wf_tensor *sz = k->in[0];
    char b[SB];
    if (sz->size != 1 || sz->rank > 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "size %s must be a scalar", wf__shape_str(sz->rank, sz->dims, b));
    int64_t n = wf__load_i64(sz->data, sz->dtype, 0);
    if (n < 0) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "size %" PRId64 " must be >= 0", n);
    wf_dtype dt = (wf_dtype)wf__attr_i(k->op, k->attrs, "output_datatype");
    double N1 = (double)(wf__attr_i(k->op, k->attrs, "periodic") ? n : n - 1);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, dt, 1, &n, &y));
    for (int64_t i = 0; i < n; i++) {
        double t = 2.0 * M_PI * (double)i / N1, v;
        if (kind == WIN_HANN) v = 0.5 - 0.5 * cos(t);
        else if (kind == WIN_HAMMING) v = 25.0 / 46.0 - (21.0 / 46.0) * cos(t);
        else v = 0.42 - 0.5 * cos(t) + 0.08 * cos(2.0 * t);
        wf__store_f64(y->data, dt, i, v);
    }
    return NULL;
}

static wf_status *k_hann(wf__kctx *k) { return window(k, WIN_HANN); }
static wf_status *k_hamming(wf__kctx *k) { return window(k, WIN_HAMMING); }
static wf_status *k_blackman(wf__kctx *k) { return window(k, WIN_BLACKMAN); }

/* ---- the table ------------------------------------------------------------------------------------ */

#define QIN (WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8) | WF__DT_BIT(WF_I16) | WF__DT_BIT(WF_I32))

const wf__kernel_def wf__cpu_kernels_onnx[] = {
    {"NegativeLogLikelihoodLoss", "CPU", WF__DT_FLOATS, 0, k_nll, NULL, 0},
    {"SoftmaxCrossEntropyLoss", "CPU", WF__DT_FLOATS, 0, k_sce, NULL, 0},
    {"Attention", "CPU", WF__DT_FLOATS, 0, wf__k_attention, NULL, 0},
    {"RotaryEmbedding", "CPU", WF__DT_FLOATS, 0, wf__k_rotary_embedding, NULL, 0},
    {"QuantizeLinear", "CPU", WF__DT_FLOATS | WF__DT_BIT(WF_I32), 0, wf__k_quantize_linear, NULL, 0},
    {"DequantizeLinear", "CPU", QIN, 0, wf__k_dequantize_linear, NULL, 0},
    {"DynamicQuantizeLinear", "CPU", WF__DT_BIT(WF_F32), 0, wf__k_dynamic_quantize_linear, NULL, 0},
    {"MatMulInteger", "CPU", WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8), 0, wf__k_matmul_integer, NULL, 0},
    {"QLinearMatMul", "CPU", WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8), 0, wf__k_qlinear_matmul, NULL, 0},
    {"ConvInteger", "CPU", WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8), 0, wf__k_conv_integer, NULL, 0},
    {"QLinearConv", "CPU", WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_I8), 0, wf__k_qlinear_conv, NULL, 0},
    {"LpPool", "CPU", WF__DT_FLOATS, 0, k_lppool, NULL, 0},
    {"CenterCropPad", "CPU", WF__DT_ALL, 0, k_center_crop_pad, NULL, 0},
    {"HannWindow", "CPU", WF__DT_NUMERIC, -1, k_hann, NULL, 0},
    {"HammingWindow", "CPU", WF__DT_NUMERIC, -1, k_hamming, NULL, 0},
    {"BlackmanWindow", "CPU", WF__DT_NUMERIC, -1, k_blackman, NULL, 0},
    {0},
};
