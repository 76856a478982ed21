/*
 * The backward ops of convolution and pooling on the CPU (Conv2DBackpropInput, Conv2DBackpropFilter,
 * MaxPool2DGrad, AvgPool2DGrad, GlobalAvgPoolGrad) as direct loops in f32 and f64; f16 and bf16 are
 * computed in f32. Each parallel task owns whole output planes (or filter slices), so no two tasks write
 * the same element and no atomics are needed. The window rules are ops/nn_window.h's, as in the forward.
 */
#include "k_dnnl.h"

#include <math.h>

/* A shape input (input_sizes, filter_sizes): i32/i64, 1-D, n values, none negative. */
static wf_status *read_sizes(wf__kctx *k, int idx, const char *what, int min_n, int max_n, int64_t *v, int *n)
{
    const wf_tensor *t = k->in[idx];
    char s[160];
    if (!wf__nn_sizes_form_ok(t, min_n, max_n))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s must be a 1-D i32/i64 tensor of %d values", what,
                             wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, s), min_n);
    *n = (int)t->size;
    for (int i = 0; i < *n; i++) v[i] = wf__load_i64(t->data, t->dtype, i);
    int i = wf__nn_sizes_negative(v, *n);
    if (i >= 0) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s[%d] is %lld; must be >= 0", what, i, (long long)v[i]);
    return NULL;
}

static wf_status *check_float4(wf__kctx *k, const wf_tensor *t, const char *what, wf_dtype dt)
{
    char s[160];
    if (t->rank != 4 || t->dtype != dt)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s%s must be 4-D %s", what, wf_dtype_name(t->dtype),
                             wf__shape_str(t->rank, t->dims, s), wf_dtype_name(dt));
    return NULL;
}

/* Resolves the forward window over in_hw and checks that it produces dy's spatial dims. */
static wf_status *window(wf__kctx *k, int kind, const int64_t *in_hw, const int64_t *wk, const wf_tensor *dy,
                         wf__nn_window *w)
{
    char err[320];
    if (wf__nn_grad_window(wf__attr_get, k->op, k->attrs, kind, in_hw, wk, dy->dims + 2, w, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    return NULL;
}

/* f16/bf16 inputs converted to f32 for the f32 loops, and the f32 result converted back. */
typedef struct lowp {
    float *in[2];
    float *out;
} lowp;

static void lowp_free(lowp *l)
{
    wf__aligned_free(l->in[0]);
    wf__aligned_free(l->in[1]);
    wf__aligned_free(l->out);
}

static bool is_lowp(wf_dtype t) { return t == WF_F16 || t == WF_BF16; }

/* ---- Conv2DBackpropInput ------------------------------------------------------------------------------- */

typedef struct conv_geom {
    int64_t n, c, h, w, m, g, kh, kw, oh, ow;
    const wf__nn_window *win;
    const void *a, *b; /* BackpropInput: W, dy; BackpropFilter: x, dy */
    void *y;
} conv_geom;

/* one dx plane (n, c) per step: scatter every tap of every output channel of c's group */
#define BP_INPUT_LOOP(NAME, T)                                                                             \
    WF__VEC static void NAME(void *arg, int64_t p0, int64_t p1)                                            \
    {                                                                                                      \
        const conv_geom *g = arg;                                                                          \
        const wf__nn_window *wn = g->win;                                                                  \
        const T *W = g->a, *DY = g->b;                                                                     \
        int64_t icg = g->c / g->g, ocg = g->m / g->g, H = g->h, Wd = g->w, OH = g->oh, OW = g->ow;         \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            int64_t n = p / g->c, c = p % g->c, grp = c / icg, j = c % icg;                                \
            T *dx = (T *)g->y + p * H * Wd;                                                                \
            for (int64_t i = 0; i < H * Wd; i++) dx[i] = 0;                                                \
            for (int64_t m = grp * ocg; m < (grp + 1) * ocg; m++) {                                        \
                const T *dy = DY + (n * g->m + m) * OH * OW;                                               \
                const T *wp = W + (m * icg + j) * g->kh * g->kw;                                           \
                for (int64_t a = 0; a < g->kh; a++)                                                        \
                    for (int64_t b = 0; b < g->kw; b++) {                                                  \
                        T wv = wp[a * g->kw + b];                                                          \
                        for (int64_t oh = 0; oh < OH; oh++) {                                              \
                            int64_t ih = oh * wn->s[0] - wn->pb[0] + a * wn->d[0];                         \
                            if (ih < 0 || ih >= H) continue;                                               \
                            for (int64_t ow = 0; ow < OW; ow++) {                                          \
                                int64_t iw = ow * wn->s[1] - wn->pb[1] + b * wn->d[1];                     \
                                if (iw >= 0 && iw < Wd) dx[ih * Wd + iw] += wv * dy[oh * OW + ow];         \
                            }                                                                              \
                        }                                                                                  \
                    }                                                                                      \
            }                                                                                              \
        }                                                                                                  \
    }
BP_INPUT_LOOP(bp_input_f32, float)
BP_INPUT_LOOP(bp_input_f64, double)

/* one filter slice (m, j) per step: every tap sums dy * x over the batch and the output positions */
#define BP_FILTER_LOOP(NAME, T)                                                                            \
    WF__VEC static void NAME(void *arg, int64_t p0, int64_t p1)                                            \
    {                                                                                                      \
        const conv_geom *g = arg;                                                                          \
        const wf__nn_window *wn = g->win;                                                                  \
        const T *X = g->a, *DY = g->b;                                                                     \
        int64_t icg = g->c / g->g, ocg = g->m / g->g, H = g->h, Wd = g->w, OH = g->oh, OW = g->ow;         \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            int64_t m = p / icg, j = p % icg, c = (m / ocg) * icg + j;                                     \
            T *dw = (T *)g->y + p * g->kh * g->kw;                                                         \
            for (int64_t a = 0; a < g->kh; a++)                                                            \
                for (int64_t b = 0; b < g->kw; b++) {                                                      \
                    double acc = 0;                                                                        \
                    for (int64_t n = 0; n < g->n; n++) {                                                   \
                        const T *x = X + (n * g->c + c) * H * Wd, *dy = DY + (n * g->m + m) * OH * OW;     \
                        for (int64_t oh = 0; oh < OH; oh++) {                                              \
                            int64_t ih = oh * wn->s[0] - wn->pb[0] + a * wn->d[0];                         \
                            if (ih < 0 || ih >= H) continue;                                               \
                            T part = 0;                                                                    \
                            for (int64_t ow = 0; ow < OW; ow++) {                                          \
                                int64_t iw = ow * wn->s[1] - wn->pb[1] + b * wn->d[1];                     \
                                if (iw >= 0 && iw < Wd) part += dy[oh * OW + ow] * x[ih * Wd + iw];        \
                            }                                                                              \
                            acc += (double)part;                                                           \
                        }                                                                                  \
                    }                                                                                      \
                    dw[a * g->kw + b] = (T)acc;                                                            \
                }                                                                                          \
        }                                                                                                  \
    }
BP_FILTER_LOOP(bp_filter_f32, float)
BP_FILTER_LOOP(bp_filter_f64, double)

/* Runs a conv backward loop for the key dtype t: inputs a and b (same dtype t), output y of ny elements. */
static wf_status *run_conv_loop(wf__kctx *k, conv_geom *g, wf_dtype t, const wf_tensor *a, const wf_tensor *b,
                                wf_tensor *y, int64_t tasks, int64_t per_task, wf__range_fn f32, wf__range_fn f64)
{
    int64_t grain = 32768 / (per_task + 1) + 1;
    g->a = a->data, g->b = b->data, g->y = y->data;
    if (t == WF_F32 || t == WF_F64) {
        wf__parallel_for(k, tasks, grain, t == WF_F32 ? f32 : f64, g);
        return NULL;
    }
    lowp l = {{NULL, NULL}, NULL};
    wf_status *s;
    if (!(s = wf__dn_to_f32(k, a->data, t, a->size, &l.in[0])) && !(s = wf__dn_to_f32(k, b->data, t, b->size, &l.in[1])) &&
        !(s = wf__dn_alloc_f32(k, y->size, &l.out))) {
        g->a = l.in[0], g->b = l.in[1], g->y = l.out;
        wf__parallel_for(k, tasks, grain, f32, g);
        wf__convert(l.out, WF_F32, y->data, t, y->size);
    }
    lowp_free(&l);
    return s;
}

static wf_status *k_conv_bp_input(wf__kctx *k)
{
    const wf_tensor *w = k->in[1], *dy = k->in[2];
    int64_t xs[4];
    int nx;
    char sw[160], sd[160];
    WF__TRY(read_sizes(k, 0, "input_sizes", 4, 4, xs, &nx));
    WF__TRY(check_float4(k, dy, "dy", dy->dtype));
    WF__TRY(check_float4(k, w, "W", dy->dtype));
    conv_geom g = {.n = xs[0], .c = xs[1], .h = xs[2], .w = xs[3], .m = w->dims[0], .kh = w->dims[2], .kw = w->dims[3],
                   .oh = dy->dims[2], .ow = dy->dims[3]};
    g.g = wf__attr_i(k->op, k->attrs, "group");
    if (g.g < 1 || g.m % g.g || w->dims[1] * g.g != g.c || dy->dims[1] != g.m || dy->dims[0] != g.n)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "W %s, dy %s, group %lld and input_sizes [%lld,%lld,%lld,%lld] do "
                             "not match", wf__shape_str(4, w->dims, sw), wf__shape_str(4, dy->dims, sd), (long long)g.g,
                             (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3]);
    wf__nn_window wn;
    WF__TRY(window(k, WF__WIN_CONV, xs + 2, w->dims + 2, dy, &wn));
    g.win = &wn;
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, dy->dtype, 4, xs, &y));
    if (!y->size) return NULL;
    return run_conv_loop(k, &g, dy->dtype, w, dy, y, g.n * g.c, (g.m / g.g) * g.kh * g.kw * g.oh * g.ow, bp_input_f32,
                         bp_input_f64);
}

static wf_status *k_conv_bp_filter(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *dy = k->in[2];
    int64_t fs[4];
    int nf;
    char sx[160], sd[160];
    WF__TRY(read_sizes(k, 1, "filter_sizes", 4, 4, fs, &nf));
    WF__TRY(check_float4(k, x, "x", x->dtype));
    WF__TRY(check_float4(k, dy, "dy", x->dtype));
    conv_geom g = {.n = x->dims[0], .c = x->dims[1], .h = x->dims[2], .w = x->dims[3], .m = fs[0], .kh = fs[2],
                   .kw = fs[3], .oh = dy->dims[2], .ow = dy->dims[3]};
    g.g = wf__attr_i(k->op, k->attrs, "group");
    if (g.g < 1 || g.m % g.g || fs[1] * g.g != g.c || dy->dims[1] != g.m || dy->dims[0] != g.n)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "x %s, dy %s, group %lld and filter_sizes [%lld,%lld,%lld,%lld] do "
                             "not match", wf__shape_str(4, x->dims, sx), wf__shape_str(4, dy->dims, sd), (long long)g.g,
                             (long long)fs[0], (long long)fs[1], (long long)fs[2], (long long)fs[3]);
    wf__nn_window wn;
    int64_t in_hw[2] = {g.h, g.w};
    WF__TRY(window(k, WF__WIN_CONV, in_hw, fs + 2, dy, &wn));
    g.win = &wn;
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, 4, fs, &y));
    if (!y->size) return NULL;
    if (!x->size || !dy->size) {
        memset(y->data, 0, y->bytes);
        return NULL;
    }
    return run_conv_loop(k, &g, x->dtype, x, dy, y, g.m * fs[1], g.kh * g.kw * g.n * g.oh * g.ow, bp_filter_f32,
                         bp_filter_f64);
}

/* ---- pools ------------------------------------------------------------------------------------------------ */

typedef struct pool_geom {
    const wf__nn_window *wn;
    int64_t h, w;
    const void *x, *dy; /* x: MaxPool2DGrad only */
    void *dx;
    bool include_pad;
} pool_geom;

/* The forward's max: the first NaN of the window if any, else its first strict maximum in row-major tap
 * order (the CPU and OpenCL MaxPool2D loops' rule); a window of -inf only picks its first valid tap. */
#define MAX_GRAD_LOOP(NAME, T)                                                                             \
    static void NAME(void *arg, int64_t p0, int64_t p1)                                                    \
    {                                                                                                      \
        const pool_geom *r = arg;                                                                          \
        const wf__nn_window *wn = r->wn;                                                                   \
        int64_t oh = wn->out[0], ow = wn->out[1], H = r->h, W = r->w;                                      \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            const T *x = (const T *)r->x + p * H * W, *dy = (const T *)r->dy + p * oh * ow;                \
            T *dx = (T *)r->dx + p * H * W;                                                                \
            for (int64_t i = 0; i < H * W; i++) dx[i] = 0;                                                 \
            for (int64_t yh = 0; yh < oh; yh++)                                                            \
                for (int64_t yw = 0; yw < ow; yw++) {                                                      \
                    double acc = -INFINITY;                                                                \
                    int64_t arg = -1, first = -1;                                                          \
                    for (int64_t a = 0; a < wn->k[0]; a++) {                                               \
                        int64_t ih = yh * wn->s[0] - wn->pb[0] + a * wn->d[0];                             \
                        if (ih < 0 || ih >= H) continue;                                                   \
                        for (int64_t b = 0; b < wn->k[1]; b++) {                                           \
                            int64_t iw = yw * wn->s[1] - wn->pb[1] + b * wn->d[1];                         \
                            if (iw < 0 || iw >= W) continue;                                               \
                            double v = (double)x[ih * W + iw];                                             \
                            if (first < 0) first = ih * W + iw;                                           \
                            if ((v > acc || isnan(v)) && !isnan(acc)) acc = v, arg = ih * W + iw;          \
                        }                                                                                  \
                    }                                                                                      \
                    if (arg < 0) arg = first;                                                              \
                    if (arg >= 0) dx[arg] += dy[yh * ow + yw];                                             \
                }                                                                                          \
        }                                                                                                  \
    }
MAX_GRAD_LOOP(max_grad_f32, float)
MAX_GRAD_LOOP(max_grad_f64, double)

/* Each output spreads dy / divisor over its window's input taps; the divisor is the forward's (taps in the
 * padded extent for count_include_pad, else taps inside the input). A window with no divisor (its forward
 * value is NaN) passes nothing back. */
#define AVG_GRAD_LOOP(NAME, T)                                                                             \
    static void NAME(void *arg, int64_t p0, int64_t p1)                                                    \
    {                                                                                                      \
        const pool_geom *r = arg;                                                                          \
        const wf__nn_window *wn = r->wn;                                                                   \
        int64_t oh = wn->out[0], ow = wn->out[1], H = r->h, W = r->w;                                      \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            const T *dy = (const T *)r->dy + p * oh * ow;                                                  \
            T *dx = (T *)r->dx + p * H * W;                                                                \
            for (int64_t i = 0; i < H * W; i++) dx[i] = 0;                                                 \
            for (int64_t yh = 0; yh < oh; yh++)                                                            \
                for (int64_t yw = 0; yw < ow; yw++) {                                                      \
                    int64_t n_valid = 0, n_pad = 0;                                                        \
                    for (int64_t a = 0; a < wn->k[0]; a++) {                                               \
                        int64_t ih = yh * wn->s[0] - wn->pb[0] + a * wn->d[0];                             \
                        if (ih < -wn->pb[0] || ih >= H + wn->pe[0]) continue;                              \
                        for (int64_t b = 0; b < wn->k[1]; b++) {                                           \
                            int64_t iw = yw * wn->s[1] - wn->pb[1] + b * wn->d[1];                         \
                            if (iw < -wn->pb[1] || iw >= W + wn->pe[1]) continue;                          \
                            n_pad++;                                                                       \
                            n_valid += ih >= 0 && ih < H && iw >= 0 && iw < W;                             \
                        }                                                                                  \
                    }                                                                                      \
                    int64_t div = r->include_pad ? n_pad : n_valid;                                        \
                    if (!div) continue;                                                                    \
                    T gv = (T)((double)dy[yh * ow + yw] / (double)div);                                    \
                    for (int64_t a = 0; a < wn->k[0]; a++) {                                               \
                        int64_t ih = yh * wn->s[0] - wn->pb[0] + a * wn->d[0];                             \
                        if (ih < 0 || ih >= H) continue;                                                   \
                        for (int64_t b = 0; b < wn->k[1]; b++) {                                           \
                            int64_t iw = yw * wn->s[1] - wn->pb[1] + b * wn->d[1];                         \
                            if (iw >= 0 && iw < W) dx[ih * W + iw] += gv;                                  \
                        }                                                                                  \
                    }                                                                                      \
                }                                                                                          \
        }                                                                                                  \
    }
AVG_GRAD_LOOP(avg_grad_f32, float)
AVG_GRAD_LOOP(avg_grad_f64, double)

static wf_status *run_pool_loop(wf__kctx *k, pool_geom *r, wf_dtype t, const wf_tensor *x, const wf_tensor *dy,
                                wf_tensor *y, wf__range_fn f32, wf__range_fn f64)
{
    int64_t planes = y->dims[0] * y->dims[1];
    int64_t per = r->wn->out[0] * r->wn->out[1] * r->wn->k[0] * r->wn->k[1] + r->h * r->w;
    int64_t grain = 32768 / (per + 1) + 1;
    r->x = x ? x->data : NULL, r->dy = dy->data, r->dx = y->data;
    if (t == WF_F32 || t == WF_F64) {
        wf__parallel_for(k, planes, grain, t == WF_F32 ? f32 : f64, r);
        return NULL;
    }
    lowp l = {{NULL, NULL}, NULL};
    wf_status *s;
    if (!(s = wf__dn_to_f32(k, x ? x->data : NULL, t, x ? x->size : 0, &l.in[0])) &&
        !(s = wf__dn_to_f32(k, dy->data, t, dy->size, &l.in[1])) && !(s = wf__dn_alloc_f32(k, y->size, &l.out))) {
        r->x = l.in[0], r->dy = l.in[1], r->dx = l.out;
        wf__parallel_for(k, planes, grain, f32, r);
        wf__convert(l.out, WF_F32, y->data, t, y->size);
    }
    lowp_free(&l);
    return s;
}

static wf_status *k_max_pool_grad(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *dy = k->in[1];
    char sx[160], sd[160];
    WF__TRY(check_float4(k, x, "x", x->dtype));
    WF__TRY(check_float4(k, dy, "dy", x->dtype));
    if (x->dims[0] != dy->dims[0] || x->dims[1] != dy->dims[1])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "x %s and dy %s differ in N or C", wf__shape_str(4, x->dims, sx),
                             wf__shape_str(4, dy->dims, sd));
    wf__nn_window wn;
    WF__TRY(window(k, WF__WIN_POOL, x->dims + 2, NULL, dy, &wn));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, 4, x->dims, &y));
    if (!y->size) return NULL;
    pool_geom r = {.wn = &wn, .h = x->dims[2], .w = x->dims[3]};
    return run_pool_loop(k, &r, x->dtype, x, dy, y, max_grad_f32, max_grad_f64);
}

static wf_status *k_avg_pool_grad(wf__kctx *k)
{
    const wf_tensor *dy = k->in[1];
    int64_t xs[4];
    int nx;
    char sd[160];
    WF__TRY(read_sizes(k, 0, "input_sizes", 4, 4, xs, &nx));
    WF__TRY(check_float4(k, dy, "dy", dy->dtype));
    if (xs[0] != dy->dims[0] || xs[1] != dy->dims[1])
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "dy %s and input_sizes [%lld,%lld,...] differ in N or C",
                             wf__shape_str(4, dy->dims, sd), (long long)xs[0], (long long)xs[1]);
    wf__nn_window wn;
    WF__TRY(window(k, WF__WIN_POOL, xs + 2, NULL, dy, &wn));
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, dy->dtype, 4, xs, &y));
    if (!y->size) return NULL;
    pool_geom r = {.wn = &wn, .h = xs[2], .w = xs[3]};
    r.include_pad = wf__attr_i(k->op, k->attrs, "count_include_pad") != 0;
    return run_pool_loop(k, &r, dy->dtype, NULL, dy, y, avg_grad_f32, avg_grad_f64);
}

/* ---- GlobalAvgPoolGrad -------------------------------------------------------------------------------------- */

static wf_status *k_gap_grad(wf__kctx *k)
{
    const wf_tensor *dy = k->in[1];
    int64_t xs[WF_MAX_RANK];
    int nx;
    char sd[160];
    WF__TRY(read_sizes(k, 0, "input_sizes", 3, WF_MAX_RANK, xs, &nx));
    bool ok = dy->rank == nx && (dy->dtype == WF_F32 || dy->dtype == WF_F64 || is_lowp(dy->dtype));
    for (int i = 0; ok && i < nx; i++) ok = dy->dims[i] == (i < 2 ? xs[i] : 1);
    if (!ok)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "dy %s%s is not the GlobalAvgPool output of an input of %d dims",
                             wf_dtype_name(dy->dtype), wf__shape_str(dy->rank, dy->dims, sd), nx);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, dy->dtype, nx, xs, &y));
    if (!y->size) return NULL;
    int64_t inner = y->size / dy->size;
    /* cheap and memory-bound: one pass in the widest type, no intra-op split needed below a few MB */
    for (int64_t p = 0; p < dy->size; p++) {
        double v = wf__load_f64(dy->data, dy->dtype, p) / (double)inner;
        if (dy->dtype == WF_F32) {
            float *d = (float *)y->data + p * inner;
            for (int64_t i = 0; i < inner; i++) d[i] = (float)v;
        } else {
            for (int64_t i = 0; i < inner; i++) wf__store_f64(y->data, dy->dtype, p * inner + i, v);
        }
    }
    return NULL;
}

/* ---- kernel table -------------------------------------------------------------------------------------------- */

const wf__kernel_def wf__cpu_kernels_nn_grad[] = {
    {"Conv2DBackpropInput", "CPU", WF__DT_FLOATS, 2, k_conv_bp_input, NULL, 0},
    {"Conv2DBackpropFilter", "CPU", WF__DT_FLOATS, 0, k_conv_bp_filter, NULL, 0},
    {"MaxPool2DGrad", "CPU", WF__DT_FLOATS, 0, k_max_pool_grad, NULL, 0},
    {"AvgPool2DGrad", "CPU", WF__DT_FLOATS, 1, k_avg_pool_grad, NULL, 0},
    {"GlobalAvgPoolGrad", "CPU", WF__DT_FLOATS, 1, k_gap_grad, NULL, 0},
    {0},
};
