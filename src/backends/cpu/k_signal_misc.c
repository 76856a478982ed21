/*
 * CPU kernels of ops_rnn_image.c whose outputs are not images: NonMaxSuppression, Unique (all four outputs,
 * with or without an axis), DFT (real or complex input, onesided, inverse) and BitCast.
 */
#include "backends/cpu/k_rnn_image.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define SB WF__KO2_SB
#define PI 3.14159265358979323846

/* A stable merge sort of n int64 keys with a comparison that takes a context (C11 qsort has none). */
typedef int (*cmp_fn)(const void *ctx, int64_t a, int64_t b);

static void merge_sort(int64_t *v, int64_t *tmp, int64_t n, cmp_fn cmp, const void *ctx)
{
    if (n < 2) return;
    int64_t h = n / 2;
    merge_sort(v, tmp, h, cmp, ctx);
    merge_sort(v + h, tmp, n - h, cmp, ctx);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) tmp[o++] = cmp(ctx, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[o++] = v[i++];
    while (j < n) tmp[o++] = v[j++];
    memcpy(v, tmp, sizeof(int64_t) * (size_t)n);
}

/* ---- NonMaxSuppression ------------------------------------------------------------------------- */

typedef struct nms_ctx {
    const double *score;
} nms_ctx;

/* higher score first; equal scores keep the lower box index first */
static int nms_cmp(const void *ctx, int64_t a, int64_t b)
{
    const double *s = ((const nms_ctx *)ctx)->score;
    if (s[a] != s[b]) return s[a] > s[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static bool nms_suppress(const double *b1, const double *b2, bool center, double thr)
{
    double x1a, x1b, y1a, y1b, x2a, x2b, y2a, y2b;
    if (center) {
        x1a = b1[0] - b1[2] / 2, x1b = b1[0] + b1[2] / 2, y1a = b1[1] - b1[3] / 2, y1b = b1[1] + b1[3] / 2;
        x2a = b2[0] - b2[2] / 2, x2b = b2[0] + b2[2] / 2, y2a = b2[1] - b2[3] / 2, y2b = b2[1] + b2[3] / 2;
    } else {
        /* [y1, x1, y2, x2] with the corners in either order */
        x1a = fmin(b1[1], b1[3]), x1b = fmax(b1[1], b1[3]), y1a = fmin(b1[0], b1[2]), y1b = fmax(b1[0], b1[2]);
        x2a = fmin(b2[1], b2[3]), x2b = fmax(b2[1], b2[3]), y2a = fmin(b2[0], b2[2]), y2b = fmax(b2[0], b2[2]);
    }
    double ix = fmin(x1b, x2b) - fmax(x1a, x2a), iy = fmin(y1b, y2b) - fmax(y1a, y2a);
    if (ix <= 0 || iy <= 0) return false;
    double inter = ix * iy, a1 = (x1b - x1a) * (y1b - y1a), a2 = (x2b - x2a) * (y2b - y2a), uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > thr;
}

wf_status *wf__k_nms(wf__kctx *k)
{
    const wf_tensor *B = k->in[0], *S = k->in[1];
    char b0[SB], b1[SB];
    if (B->rank != 3 || B->dims[2] != 4 || S->rank != 3 || S->dims[0] != B->dims[0] || S->dims[2] != B->dims[1])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "boxes %s and scores %s must be [B, S, 4] and [B, C, S]",
                             wf__shape_str(B->rank, B->dims, b0), wf__shape_str(S->rank, S->dims, b1));
    int64_t nb = B->dims[0], ns = B->dims[1], nc = S->dims[1], max_out = 0;
    double iou = 0, sthr = 0;
    bool use_sthr = false;
    if (wf__ko2_has(k, 2) && k->in[2]->size > 0) max_out = wf__load_i64(k->in[2]->data, k->in[2]->dtype, 0);
    if (wf__ko2_has(k, 3) && k->in[3]->size > 0) iou = wf__load_f64(k->in[3]->data, k->in[3]->dtype, 0);
    if (wf__ko2_has(k, 4) && k->in[4]->size > 0) sthr = wf__load_f64(k->in[4]->data, k->in[4]->dtype, 0), use_sthr = true;
    if (max_out < 0) max_out = 0;
    if (iou < 0 || iou > 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "iou_threshold %g is outside [0, 1]", iou);
    bool center = wf__attr_i(k->op, k->attrs, "center_point_box") != 0;
    double *bx = NULL, *sc = NULL;
    int64_t *cand = NULL, *tmp = NULL, *sel = NULL, *out = NULL, nout = 0;
    wf_status *s;
    size_t cap = (size_t)(ns > 0 ? ns : 1) * sizeof(int64_t);
    if ((s = wf__ko2_widen(k, B, &bx)) || (s = wf__ko2_widen(k, S, &sc))) goto done;
    cand = wf__malloc(cap), tmp = wf__malloc(cap), sel = wf__malloc(cap);
    int64_t ocap = nb * nc * (max_out < ns ? max_out : ns);
    out = wf__malloc((size_t)(ocap > 0 ? ocap : 1) * 3 * sizeof(int64_t));
    if (!cand || !tmp || !sel || !out) {
        s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %" PRId64 " boxes", ns);
        goto done;
    }
    for (int64_t b = 0; b < nb; b++)
        for (int64_t c = 0; c < nc; c++) {
            const double *score = sc + (b * nc + c) * ns, *boxes = bx + b * ns * 4;
            int64_t n = 0, nsel = 0;
            for (int64_t i = 0; i < ns; i++)
                if (!use_sthr || score[i] > sthr) cand[n++] = i;
            nms_ctx ctx = {score};
            merge_sort(cand, tmp, n, nms_cmp, &ctx);
            for (int64_t i = 0; i < n && nsel < max_out; i++) {
                bool keep = true;
                for (int64_t j = 0; j < nsel && keep; j++)
                    keep = !nms_suppress(boxes + cand[i] * 4, boxes + sel[j] * 4, center, iou);
                if (!keep) continue;
                sel[nsel++] = cand[i];
                out[nout * 3] = b, out[nout * 3 + 1] = c, out[nout * 3 + 2] = cand[i];
                nout++;
            }
        }
    int64_t od[2] = {nout, 3};
    wf_tensor *y;
    if (!(s = wf__kctx_output(k, 0, WF_I64, 2, od, &y))) memcpy(y->data, out, sizeof(int64_t) * (size_t)(nout * 3));
done:
    wf__free(bx), wf__free(sc), wf__free(cand), wf__free(tmp), wf__free(sel), wf__free(out);
    return s;
}

/* ---- Unique ---------------------------------------------------------------------------------- */

typedef struct uq_ctx {
    const wf_tensor *x;
    int64_t len, inner, dim; /* slice length, elements after the axis, the axis' extent */
    bool fl;
} uq_ctx;

static inline int64_t uq_off(const uq_ctx *u, int64_t slice, int64_t j)
{
    return (j / u->inner * u->dim + slice) * u->inner + j % u->inner;
}

/* Lexicographic over the slices' elements; NaN sorts last and equals NaN, as numpy's unique. */
static int uq_cmp(const void *ctx, int64_t a, int64_t b)
{
    const uq_ctx *u = ctx;
    for (int64_t j = 0; j < u->len; j++) {
        int64_t oa = uq_off(u, a, j), ob = uq_off(u, b, j);
        if (u->fl) {
            double x = wf__load_f64(u->x->data, u->x->dtype, oa), y = wf__load_f64(u->x->data, u->x->dtype, ob);
            bool nx = isnan(x), ny = isnan(y);
            if (nx || ny) {
                if (nx != ny) return nx ? 1 : -1;
                continue;
            }
            if (x != y) return x < y ? -1 : 1;
        } else {
            int64_t x = wf__load_i64(u->x->data, u->x->dtype, oa), y = wf__load_i64(u->x->data, u->x->dtype, ob);
            if (x != y) return x < y ? -1 : 1;
        }
    }
    return 0;
}

static int i64_cmp_first(const void *ctx, int64_t a, int64_t b)
{
    const int64_t *first = ctx;
    return first[a] < first[b] ? -1 : first[a] > first[b];
}

wf_status *wf__k_unique(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    char b[SB];
    const wf__attr *ax = wf__attr_get(k->op, k->attrs, "axis");
    bool sorted = wf__attr_i(k->op, k->attrs, "sorted") != 0;
    int a = -1;
    if (ax->set && !wf__norm_axis(ax->i, X->rank, &a))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", ax->i,
                             wf__shape_str(X->rank, X->dims, b));
    uq_ctx u = {.x = X, .fl = wf__dtype_is_float(X->dtype)};
    int64_t n;
    if (a < 0) {
        n = X->size, u.len = 1, u.inner = 1, u.dim = n;
    } else {
        n = X->dims[a], u.dim = n, u.inner = wf__numel(X->rank - a - 1, X->dims + a + 1);
        u.len = n ? X->size / n : 0;
    }
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(int64_t);
    int64_t *ord = wf__malloc(bytes), *tmp = wf__malloc(bytes), *inv = wf__malloc(bytes), *first = wf__malloc(bytes),
            *cnt = wf__malloc(bytes), *rank = wf__malloc(bytes);
    wf_status *s = NULL;
    if (!ord || !tmp || !inv || !first || !cnt || !rank) {
        s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %" PRId64 " slices", n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) ord[i] = i;
    merge_sort(ord, tmp, n, uq_cmp, &u);
    /* groups in sorted order; the stable sort puts each group's first occurrence first */
    int64_t ng = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || uq_cmp(&u, ord[i - 1], ord[i]) != 0) first[ng] = ord[i], cnt[ng] = 0, ng++;
        cnt[ng - 1]++;
        inv[ord[i]] = ng - 1;
    }
    /* rank[g]: the group's position in the output (sorted order or order of first occurrence) */
    for (int64_t g = 0; g < ng; g++) tmp[g] = g;
    if (!sorted) {
        int64_t *t2 = ord; /* ord is no longer needed */
        merge_sort(tmp, t2, ng, i64_cmp_first, first);
    }
    for (int64_t g = 0; g < ng; g++) rank[tmp[g]] = g;
    int64_t ydims[WF_MAX_RANK];
    int yrank = a < 0 ? 1 : X->rank;
    if (a < 0) ydims[0] = ng;
    else memcpy(ydims, X->dims, sizeof(int64_t) * (size_t)X->rank), ydims[a] = ng;
    wf_tensor *y, *t1, *t2, *t3;
    int64_t d_ng = ng, d_n = n;
    if ((s = wf__kctx_output(k, 0, X->dtype, yrank, ydims, &y)) || (s = wf__kctx_output(k, 1, WF_I64, 1, &d_ng, &t1)) ||
        (s = wf__kctx_output(k, 2, WF_I64, 1, &d_n, &t2)) || (s = wf__kctx_output(k, 3, WF_I64, 1, &d_ng, &t3)))
        goto done;
    size_t es = wf_dtype_size(X->dtype);
    uq_ctx uy = u;
    uy.dim = ng;
    for (int64_t g = 0; g < ng; g++) {
        int64_t r = rank[g];
        ((int64_t *)t1->data)[r] = first[g];
        ((int64_t *)t3->data)[r] = cnt[g];
        for (int64_t j = 0; j < u.len; j++)
            memcpy((char *)y->data + (size_t)uq_off(&uy, r, j) * es, (const char *)X->data + (size_t)uq_off(&u, first[g], j) * es,
                   es);
    }
    for (int64_t i = 0; i < n; i++) ((int64_t *)t2->data)[i] = rank[inv[i]];
done:
    wf__free(ord), wf__free(tmp), wf__free(inv), wf__free(first), wf__free(cnt), wf__free(rank);
    return s;
}

/* ---- DFT --------------------------------------------------------------------------------------- */

wf_status *wf__k_dft(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    char b[SB];
    int r = X->rank;
    if (r < 2 || (X->dims[r - 1] != 1 && X->dims[r - 1] != 2))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be [..., 1] (real) or [..., 2] (complex)",
                             wf__shape_str(r, X->dims, b));
    bool inv = wf__attr_i(k->op, k->attrs, "inverse") != 0, one = wf__attr_i(k->op, k->attrs, "onesided") != 0;
    const wf__attr *axa = wf__attr_get(k->op, k->attrs, "axis");
    int64_t axis = axa->set ? axa->i : -2, v[1];
    int nv = 0;
    if (wf__ko2_has(k, 2)) {
        WF__TRY(wf__ko2_ints(k, 2, "axis", v, 1, &nv));
        if (nv == 1) axis = v[0];
    }
    int ax;
    if (!wf__norm_axis(axis, r, &ax) || ax == r - 1)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axis %" PRId64 " is not a signal axis of input %s", axis,
                             wf__shape_str(r, X->dims, b));
    int64_t nin = X->dims[ax], L = inv && one ? 2 * (nin - 1) : nin;
    if (wf__ko2_has(k, 1)) {
        WF__TRY(wf__ko2_ints(k, 1, "dft_length", v, 1, &nv));
        if (nv == 1) L = v[0];
    }
    if (L < 1) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the DFT length %" PRId64 " must be positive", L);
    int64_t oc = inv && one ? 1 : 2, olen = one && !inv ? L / 2 + 1 : L, ic = X->dims[r - 1];
    int64_t outer = wf__numel(ax, X->dims), inner = wf__numel(r - 2 - ax, X->dims + ax + 1);
    int64_t od[WF_MAX_RANK];
    memcpy(od, X->dims, sizeof(int64_t) * (size_t)r);
    od[ax] = olen;
    od[r - 1] = oc;
    double *x = NULL, *y = NULL, *tw = NULL;
    wf_status *s;
    if ((s = wf__ko2_widen(k, X, &x)) || (s = wf__ko2_zeros(k, outer * olen * inner * oc, "the output", &y)) ||
        (s = wf__ko2_zeros(k, 2 * L, "twiddle factors", &tw)))
        goto done;
    /* e^{i 2 pi m / L} for m in [0, L): (k * t) mod L indexes it exactly */
    for (int64_t m = 0; m < L; m++) tw[2 * m] = cos(2 * PI * (double)m / (double)L), tw[2 * m + 1] = sin(2 * PI * (double)m / (double)L);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *xs = x + (o * nin * inner + i) * ic;
            double *ys = y + (o * olen * inner + i) * oc;
            int64_t xst = inner * ic, yst = inner * oc;
            if (inv && one) {
                /* the real signal whose spectrum's first half is given (numpy's irfft) */
                int64_t half = (L + 1) / 2;
                for (int64_t kk = 0; kk < L; kk++) {
                    double acc = nin > 0 ? xs[0] : 0;
                    for (int64_t j = 1; j < half && j < nin; j++) {
                        const double *w = tw + 2 * ((j * kk) % L);
                        double re = xs[j * xst], im = ic == 2 ? xs[j * xst + 1] : 0;
                        acc += 2 * (re * w[0] - im * w[1]);
                    }
                    if (L % 2 == 0 && L / 2 < nin) acc += xs[(L / 2) * xst] * ((kk % 2) ? -1 : 1);
                    ys[kk * yst] = acc / (double)L;
                }
                continue;
            }
            int64_t n = nin < L ? nin : L;
            double sign = inv ? 1 : -1, scale = inv ? 1.0 / (double)L : 1.0;
            for (int64_t kk = 0; kk < olen; kk++) {
                double re = 0, im = 0;
                for (int64_t t = 0; t < n; t++) {
                    const double *w = tw + 2 * ((kk * t) % L);
                    double xr = xs[t * xst], xi = ic == 2 ? xs[t * xst + 1] : 0, wi = sign * w[1];
                    re += xr * w[0] - xi * wi;
                    im += xr * wi + xi * w[0];
                }
                ys[kk * yst] = re * scale;
                ys[kk * yst + 1] = im * scale;
            }
        }
    s = wf__ko2_emit(k, 0, X->dtype, r, od, y);
done:
    wf__free(x), wf__free(y), wf__free(tw);
    return s;
}

/* ---- BitCast ----------------------------------------------------------------------------------- */

wf_status *wf__k_bitcast(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    wf_dtype to = (wf_dtype)wf__attr_i(k->op, k->attrs, "to");
    if (wf_dtype_size(to) != wf_dtype_size(X->dtype))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reinterpret %s as %s: the sizes differ",
                             wf_dtype_name(X->dtype), wf_dtype_name(to));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, to, X->rank, X->dims, &y));
    memcpy(y->data, X->data, X->bytes);
    /* weft's bool is one byte holding 0 or 1; other bytes reinterpreted as bool become 1 */
    if (to == WF_BOOL)
        for (int64_t i = 0; i < y->size; i++) ((uint8_t *)y->data)[i] = ((uint8_t *)y->data)[i] != 0;
    return NULL;
}
