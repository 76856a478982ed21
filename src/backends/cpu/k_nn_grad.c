/*
 * The backward ops of convolution and pooling on the CPU (Conv2DBackpropInput, Conv2DBackpropFilter,
 * MaxPool2DGrad, AvgPool2DGrad, GlobalAvgPoolGrad). The two convolution gradients run as oneDNN's
 * backward-data and backward-weights primitives in f32 and, where the CPU computes bf16 natively, in bf16
 * (f16, and bf16 elsewhere, through f32), cached per node and
 * shape like the forward's (k_dnnl_conv.c); f64, empty tensors and any geometry oneDNN declines run
 * direct loops. The pools are direct loops in f32 and f64 (f16 and bf16 in f32; the 2x2 max pools'
 * gradient reads and writes bf16 in place, k_pool2x2.h). Each parallel task of a
 * loop owns whole output planes (or filter slices), so no two tasks write the same element and no atomics
 * are needed. The window rules are ops/nn_window.h's, as in the forward.
 */
#include "k_dnnl.h"
#include "k_pool2x2.h"

#include <math.h>
#include <string.h>

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
    wf__dn_tmp_free(l->in[0]);
    wf__dn_tmp_free(l->in[1]);
    wf__dn_tmp_free(l->out);
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

/* ---- the convolution gradients through oneDNN ------------------------------------------------------------ */

/* The three tensors of a convolution in oneDNN's sense. Backward data reads wei and dst (dy) and writes
 * src (dx); backward weights reads src (x) and dst (dy) and writes wei (dW). md[WF__DN_SRC / WEI / DST] are
 * the user's plain layouts (NCHW, OIHW or GOIHW), md[*_PRIM] the primitive's choice; p->sreorder,
 * p->wreorder and p->dreorder convert between them where they differ, user to primitive for an input
 * and primitive to user for the output. */
enum { CG_SRC, CG_WEI, CG_DST, CG_N };
static const int cg_md[CG_N] = {WF__DN_SRC, WF__DN_WEI, WF__DN_DST};
static const int cg_pmd[CG_N] = {WF__DN_SRC_PRIM, WF__DN_WEI_PRIM, WF__DN_DST_PRIM};
static const int cg_slot[CG_N] = {WF__DN_SLOT_SREORDER, WF__DN_SLOT_WREORDER, WF__DN_SLOT_DREORDER};

typedef struct cg_build_arg {
    const conv_geom *g;
    bool filter;          /* backward weights, else backward data */
    dnnl_data_type_t dt;  /* every tensor's: f32, or bf16 (oneDNN accumulates in f32 and rounds once) */
} cg_build_arg;

static dnnl_primitive_t *cg_reorder(wf__dn_prim *p, int r, dnnl_memory_desc_t **scratch)
{
    *scratch = r == CG_SRC ? &p->sscratch : r == CG_WEI ? &p->wscratch : &p->dscratch;
    return r == CG_SRC ? &p->sreorder : r == CG_WEI ? &p->wreorder : &p->dreorder;
}

static wf_status *cg_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
{
    const cg_build_arg *ca = arg;
    const conv_geom *g = ca->g;
    const wf__nn_window *wn = g->win;
    dnnl_dims_t sd = {g->n, g->c, g->h, g->w}, dd = {g->n, g->m, g->oh, g->ow};
    dnnl_dims_t wd = {g->g, g->m / g->g, g->c / g->g, g->kh, g->kw};
    int wnd = 5;
    if (g->g == 1) {
        wnd = 4;
        memmove(wd, wd + 1, 4 * sizeof wd[0]);
    }
    dnnl_dims_t strides = {wn->s[0], wn->s[1]}, dil = {wn->d[0] - 1, wn->d[1] - 1};
    dnnl_dims_t pl = {wn->pb[0], wn->pb[1]}, pr = {wn->pe[0], wn->pe[1]};
    dnnl_memory_desc_t sany, wany, dany;
    dnnl_convolution_desc_t fd, bd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    dnnl_status_t st;
    const char *what = "convolution gradient memory descriptor";
    dnnl_data_type_t dt = ca->dt;
    if ((st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_SRC], 4, sd, dt, dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_DST], 4, dd, dt, dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_WEI], wnd, wd, dt, wnd == 5 ? dnnl_abcde : dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&sany, 4, sd, dt, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&dany, 4, dd, dt, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&wany, wnd, wd, dt, dnnl_format_tag_any)))
        goto fail;
    /* the backward primitive descriptor takes the forward training one as its hint */
    what = "convolution forward (hint) descriptor";
    if ((st = dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &sany,
                                                         &wany, NULL, &dany, strides, dil, pl, pr)) ||
        (st = wf__dn_attr(WF__ACT_NONE, 0, &attr)) || (st = dnnl_primitive_desc_create(&fpd, &fd, attr, eng, NULL)))
        goto fail;
    what = ca->filter ? "convolution backward-weights descriptor" : "convolution backward-data descriptor";
    st = ca->filter ? dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &sany, &wany,
                                                                          NULL, &dany, strides, dil, pl, pr)
                    : dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &sany, &wany,
                                                                       &dany, strides, dil, pl, pr);
    if (st || (st = dnnl_primitive_desc_create(&pd, &bd, attr, eng, fpd))) goto fail;
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->md[WF__DN_SRC_PRIM] = *dnnl_primitive_desc_query_md(pd, ca->filter ? dnnl_query_src_md : dnnl_query_diff_src_md, 0);
    p->md[WF__DN_WEI_PRIM] =
        *dnnl_primitive_desc_query_md(pd, ca->filter ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    p->md[WF__DN_DST_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
    what = "convolution gradient reorder";
    int out = ca->filter ? CG_WEI : CG_SRC;
    for (int r = 0; r < CG_N && !st; r++) {
        const dnnl_memory_desc_t *user = &p->md[cg_md[r]], *prim = &p->md[cg_pmd[r]];
        dnnl_memory_desc_t *scratch;
        dnnl_primitive_t *ro = cg_reorder(p, r, &scratch);
        if (!dnnl_memory_desc_equal(user, prim))
            st = r == out ? wf__dn_reorder_create(eng, prim, user, ro, scratch)
                          : wf__dn_reorder_create(eng, user, prim, ro, scratch);
    }
    if (st) goto fail;
    what = ca->filter ? "convolution backward-weights primitive" : "convolution backward-data primitive";
    if (!st) st = dnnl_primitive_create(&p->prim, pd);
    p->exact_threads = ca->filter; /* its reduction waits for every thread it was built for */
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st == dnnl_success ? NULL : wf__dn_fail(k, st, what);
}

/* One convolution gradient through oneDNN, every tensor of dtype dt (f32 or bf16): t[CG_SRC/WEI/DST] are
 * the user's tensors (the output's entry is where it is written). */
static wf_status *conv_grad_dnnl(wf__kctx *k, const conv_geom *g, bool filter, dnnl_data_type_t dt,
                                 void *const t[CG_N])
{
    int64_t key[WF__DN_KEY_MAX];
    int nk = 0;
    key[nk++] = 'G';
    key[nk++] = filter;
    key[nk++] = dt;
    const int64_t geo[] = {g->n, g->c, g->h, g->w, g->m, g->g, g->kh, g->kw, g->oh, g->ow};
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) key[nk++] = geo[i];
    memcpy(&key[nk], g->win, sizeof *g->win);
    nk += (int)(sizeof *g->win / sizeof(int64_t));
    cg_build_arg ca = {g, filter, dt};
    wf__dn_prim *p;
    WF__TRY(wf__dn_acquire(k, key, nk, cg_build, &ca, &p));
    wf__dn_run *r = NULL;
    wf_status *s = wf__dn_run_get(k, p, &r);
    int out = filter ? CG_WEI : CG_SRC;
    size_t off[CG_N], total = 0;
    for (int i = 0; i < CG_N; i++) {
        dnnl_memory_desc_t *scratch;
        off[i] = total;
        if (*cg_reorder(p, i, &scratch))
            total += (dnnl_memory_desc_get_size(&p->md[cg_pmd[i]]) + WF__ALIGN - 1) /
                     WF__ALIGN * WF__ALIGN;
    }
    void *buf = NULL, *ptr[CG_N];
    if (!s && total) s = wf__dn_run_buf(k, r, WF__DN_BUF_ACT, total, &buf);
    const dnnl_memory_desc_t *mds[CG_N];
    for (int i = 0; i < CG_N && !s; i++) {
        dnnl_memory_desc_t *scratch;
        dnnl_primitive_t ro = *cg_reorder(p, i, &scratch);
        int prim_md = cg_pmd[i];
        ptr[i] = ro ? (char *)buf + off[i] : t[i];
        mds[i] = &p->md[ro ? prim_md : cg_md[i]];
        if (ro && i != out)
            s = wf__dn_reorder(k, r, cg_slot[i], ro, &p->md[cg_md[i]], t[i], &p->md[prim_md], ptr[i], scratch);
    }
    if (!s) {
        int ids[CG_N] = {filter ? DNNL_ARG_SRC : DNNL_ARG_DIFF_SRC, filter ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS,
                         DNNL_ARG_DIFF_DST};
        s = wf__dn_exec_prim(k, r, WF__DN_SLOT_PRIM, p, CG_N, ids, mds, ptr);
    }
    dnnl_memory_desc_t *scratch;
    dnnl_primitive_t ro = *cg_reorder(p, out, &scratch);
    if (!s && ro)
        s = wf__dn_reorder(k, r, cg_slot[out], ro, &p->md[cg_pmd[out]], ptr[out],
                           &p->md[cg_md[out]], t[out], scratch);
    if (r) wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    return s;
}

/* f32 convolution gradient: oneDNN where it takes the geometry (and nothing is empty), else the loop. */
static wf_status *conv_grad_f32(wf__kctx *k, conv_geom *g, bool filter, int64_t tasks, int64_t grain, wf__range_fn f32)
{
    if (g->n && g->c && g->m && g->oh && g->ow && g->h && g->w) {
        void *t[CG_N] = {filter ? (void *)g->a : g->y, filter ? g->y : (void *)g->a, (void *)g->b};
        wf_status *s = conv_grad_dnnl(k, g, filter, dnnl_f32, t);
        if (!s || (wf_status_code(s) != WF_UNIMPLEMENTED && wf_status_code(s) != WF_INVALID_ARGUMENT)) return s;
        wf_status_free(s); /* a geometry oneDNN declines: the direct loop */
    }
    wf__parallel_for(k, tasks, grain, f32, g);
    return NULL;
}

/* Runs a conv backward for the key dtype t: inputs a and b (same dtype t), output y of ny elements. */
static wf_status *run_conv_loop(wf__kctx *k, conv_geom *g, wf_dtype t, const wf_tensor *a, const wf_tensor *b,
                                wf_tensor *y, int64_t tasks, int64_t per_task, wf__range_fn f32, wf__range_fn f64)
{
    int64_t grain = 32768 / (per_task + 1) + 1;
    bool filter = f32 == bp_filter_f32;
    g->a = a->data, g->b = b->data, g->y = y->data;
    if (t == WF_F64) {
        wf__parallel_for(k, tasks, grain, f64, g);
        return NULL;
    }
    if (t == WF_F32) return conv_grad_f32(k, g, filter, tasks, grain, f32);
    wf_status *s;
    if (t == WF_BF16 && g->n && g->c / g->g >= 8 && g->m && g->oh && g->ow && g->h && g->w) {
        /* bf16 natively where oneDNN has it (AVX512_BF16, AMX: wf__dn_fast_dtypes), with f32 accumulation
         * inside the primitive; elsewhere, under 8 input channels per group (as the forward, k_dnnl_conv.c)
         * or a geometry it declines, through f32 below */
        if (wf__dn_fast_dtypes(NULL, 0) >> WF_BF16 & 1) {
            void *tt[CG_N] = {filter ? (void *)g->a : g->y, filter ? g->y : (void *)g->a, (void *)g->b};
            s = conv_grad_dnnl(k, g, filter, dnnl_bf16, tt);
            if (!s || (wf_status_code(s) != WF_UNIMPLEMENTED && wf_status_code(s) != WF_INVALID_ARGUMENT)) return s;
            wf_status_free(s);
        }
    }
    lowp l = {{NULL, NULL}, NULL};
    if (!(s = wf__dn_to_f32(k, a->data, t, a->size, &l.in[0])) && !(s = wf__dn_to_f32(k, b->data, t, b->size, &l.in[1])) &&
        !(s = wf__dn_alloc_f32(k, y->size, &l.out))) {
        g->a = l.in[0], g->b = l.in[1], g->y = l.out;
        if (!(s = conv_grad_f32(k, g, filter, tasks, grain, f32))) wf__convert(l.out, WF_F32, y->data, t, y->size);
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
        bool dense = wn->d[0] == 1 && wn->d[1] == 1;                                                       \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            const T *x = (const T *)r->x + p * H * W, *dy = (const T *)r->dy + p * oh * ow;                \
            T *dx = (T *)r->dx + p * H * W;                                                                \
            for (int64_t i = 0; i < H * W; i++) dx[i] = 0;                                                 \
            for (int64_t yh = 0; yh < oh; yh++)                                                            \
                for (int64_t yw = 0; yw < ow; yw++) {                                                      \
                    int64_t h0 = yh * wn->s[0] - wn->pb[0], w0 = yw * wn->s[1] - wn->pb[1];                \
                    if (dense && h0 >= 0 && w0 >= 0 && h0 + wn->k[0] <= H && w0 + wn->k[1] <= W) {         \
                        /* a window inside the plane, taps adjacent: its first strict maximum without     \
                         * branches (random data mispredicts every other compare); a NaN anywhere in it     \
                         * takes the general path below */                                                 \
                        int64_t best = h0 * W + w0;                                                        \
                        T bv = x[best];                                                                    \
                        bool nan = bv != bv;                                                               \
                        for (int64_t a = 0; a < wn->k[0]; a++) {                                           \
                            const T *row = x + (h0 + a) * W + w0;                                          \
                            for (int64_t b = 0; b < wn->k[1]; b++) {                                       \
                                T v = row[b];                                                              \
                                bool c = v > bv;                                                           \
                                nan |= v != v;                                                             \
                                bv = c ? v : bv;                                                           \
                                best = c ? (h0 + a) * W + w0 + b : best;                                   \
                            }                                                                              \
                        }                                                                                  \
                        if (!nan) {                                                                        \
                            dx[best] += dy[yh * ow + yw];                                                  \
                            continue;                                                                      \
                        }                                                                                  \
                    }                                                                                      \
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

/* 2x2 windows at stride 2 over one pair of rows, N (8 or 4) windows at a time in vector extensions
 * (k_pool2x2.h): the windows' taps, each window's pick by masks (a tap replaces the pick when it is larger,
 * or when it is NaN and the pick is not: the first NaN, else the first strict maximum), and dy under the
 * masks back in row order. NAME(r0, r1, g, d0, d1): top row r0, bottom row r1, dy's values g, written to
 * d0 and d1, f32 or bf16 in place (its planes used to go through f32 copies). */
#define MG_PICKS(VF, VI, a, b, c, d, gb)                                                                 \
    VI tb = (b > a) | ((b != b) & (a == a));                                                             \
    VF m = (VF)((tb & (VI)b) | (~tb & (VI)a));                                                           \
    VI tc = (c > m) | ((c != c) & (m == m));                                                             \
    m = (VF)((tc & (VI)c) | (~tc & (VI)m));                                                              \
    VI td = (d > m) | ((d != d) & (m == m));                                                             \
    VI pa = gb & ~(tb | tc | td), pb = gb & tb & ~tc & ~td, pc = gb & tc & ~td, pd = gb & td
#define MAX_GRAD_2X2_F32(NAME, VF, VI, N)                                                                  \
    static inline __attribute__((always_inline)) void NAME(const float *r0, const float *r1,             \
                                                           const float *g, float *d0, float *d1)         \
    {                                                                                                    \
        WF__TAPS_F32(VF, N, r0, r1, a, b, c, d);                                                         \
        VI gb;                                                                                           \
        memcpy(&gb, g, sizeof gb);                                                                       \
        MG_PICKS(VF, VI, a, b, c, d, gb);                                                                \
        VI o0 = WF__SHUF(pa, pb, WF__LO##N), o1 = WF__SHUF(pa, pb, WF__HI##N);                           \
        VI o2 = WF__SHUF(pc, pd, WF__LO##N), o3 = WF__SHUF(pc, pd, WF__HI##N);                           \
        memcpy(d0, &o0, sizeof o0), memcpy(d0 + N, &o1, sizeof o1);                                      \
        memcpy(d1, &o2, sizeof o2), memcpy(d1 + N, &o3, sizeof o3);                                      \
    }
/* bf16: a lane of dx is its window's left pick in the low half and its right pick in the high half */
#define MAX_GRAD_2X2_BF16(NAME, VU, VH, VF, VI)                                                          \
    static inline __attribute__((always_inline)) void NAME(const uint16_t *r0, const uint16_t *r1,       \
                                                           const uint16_t *g, uint16_t *d0, uint16_t *d1) \
    {                                                                                                    \
        WF__TAPS_BF16(VU, VF, r0, r1, a, b, c, d);                                                       \
        VI gb = (VI)WF__BF16_WIDEN(VU, VH, g);                                                           \
        MG_PICKS(VF, VI, a, b, c, d, gb);                                                                \
        VU o0 = ((VU)pa >> 16) | (VU)pb, o1 = ((VU)pc >> 16) | (VU)pd;                                   \
        memcpy(d0, &o0, sizeof o0), memcpy(d1, &o1, sizeof o1);                                          \
    }
MAX_GRAD_2X2_F32(max_grad_2x2_8, wf__v8f, wf__v8i, 8)
MAX_GRAD_2X2_F32(max_grad_2x2_4, wf__v4f, wf__v4i, 4)
MAX_GRAD_2X2_BF16(max_grad_2x2_bf16_8, wf__v8u, wf__v8h, wf__v8f, wf__v8i)
MAX_GRAD_2X2_BF16(max_grad_2x2_bf16_4, wf__v4u, wf__v4h, wf__v4f, wf__v4i)

/* All n windows of a row pair (k_pool2x2.h's WF__ROW_2X2) */
#define MG_GROUP(F, j) F(r0 + 2 * (j), r1 + 2 * (j), g + (j), d0 + 2 * (j), d1 + 2 * (j))
#define MG_PADDED(F4)                                                                                    \
    do {                                                                                                 \
        __typeof__(*d0) t0[8] = {0}, t1[8] = {0}, tg[4] = {0}, o0[8], o1[8];                             \
        size_t rem = (size_t)n, es = sizeof *d0;                                                         \
        memcpy(t0, r0, 2 * rem * es), memcpy(t1, r1, 2 * rem * es), memcpy(tg, g, rem * es);             \
        F4(t0, t1, tg, o0, o1);                                                                          \
        memcpy(d0, o0, 2 * rem * es), memcpy(d1, o1, 2 * rem * es);                                      \
    } while (0)
#define MAX_GRAD_2X2_ROW(NAME, S, F8, F4)                                                                \
    static inline __attribute__((always_inline)) int64_t NAME(const S *r0, const S *r1, const S *g,      \
                                                              S *d0, S *d1, int64_t n)                   \
    {                                                                                                    \
        WF__ROW_2X2(n, MG_GROUP, F8, F4, MG_PADDED);                                                     \
        return n;                                                                                        \
    }
MAX_GRAD_2X2_ROW(max_grad_2x2_f32, float, max_grad_2x2_8, max_grad_2x2_4)
MAX_GRAD_2X2_ROW(max_grad_2x2_bf16, uint16_t, max_grad_2x2_bf16_8, max_grad_2x2_bf16_4)
static inline int64_t max_grad_2x2_f64(const double *r0, const double *r1, const double *g, double *d0, double *d1,
                                       int64_t n)
{
    (void)r0, (void)r1, (void)g, (void)d0, (void)d1, (void)n;
    return 0; /* f64 takes the scalar loop */
}

/* Windows that tile the plane (stride = kernel, no dilation, no padding before; ceil mode may clip the
 * last row and column of windows): each input tap belongs to at most one window, so every tap is written
 * once, with no zeroing pass and no accumulation. A 2x2 window (the usual training pool) picks its tap
 * with four branch-free compares; other sizes, clipped windows and windows holding a NaN take the
 * general rule above over their own taps. */
/* S: the stored element, T: the compare type, LD(s): an element as T (dx takes dy's stored values) */
#define MAX_GRAD_TILED(NAME, S, T, SUF, LD)                                                                     \
    WF__VEC static void NAME(void *arg, int64_t p0, int64_t p1)                                            \
    {                                                                                                      \
        const pool_geom *r = arg;                                                                          \
        const wf__nn_window *wn = r->wn;                                                                   \
        int64_t oh = wn->out[0], ow = wn->out[1], H = r->h, W = r->w, k0 = wn->k[0], k1 = wn->k[1];       \
        int64_t ch = oh * k0 < H ? oh * k0 : H, cw = ow * k1 < W ? ow * k1 : W; /* the covered extent */ \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            const S *x = (const S *)r->x + p * H * W, *dy = (const S *)r->dy + p * oh * ow;                \
            S *dx = (S *)r->dx + p * H * W;                                                                \
            for (int64_t yh = 0; yh < oh; yh++) {                                                          \
                int64_t h0 = yh * k0, nh = h0 + k0 <= H ? k0 : H - h0;                                     \
                if (nh <= 0) break; /* a ceil-mode window wholly in the end padding passes nothing */     \
                const S *g = dy + yh * ow;                                                                 \
                int64_t yw = 0;                                                                            \
                if (k0 == 2 && k1 == 2 && nh == 2) {                                                       \
                    const S *r0 = x + h0 * W, *r1 = r0 + W;                                                \
                    S *d0 = dx + h0 * W, *d1 = d0 + W;                                                     \
                    int64_t n2 = ow < W / 2 ? ow : W / 2;                                                  \
                    yw = max_grad_2x2_##SUF(r0, r1, g, d0, d1, n2);                                          \
                    for (; yw < n2; yw++) {                                                                \
                        int64_t w0 = 2 * yw;                                                               \
                        T a = LD(r0[w0]), b = LD(r0[w0 + 1]), c = LD(r1[w0]), d = LD(r1[w0 + 1]), m = a;  \
                        S gv = g[yw];                                                                      \
                        /* a tap replaces the pick when it is larger, or NaN over a pick that is not */    \
                        int i = 0, t;                                                                      \
                        t = (b > m) | ((b != b) & (m == m)), i = t ? 1 : i, m = t ? b : m;                 \
                        t = (c > m) | ((c != c) & (m == m)), i = t ? 2 : i, m = t ? c : m;                 \
                        t = (d > m) | ((d != d) & (m == m)), i = t ? 3 : i;                                \
                        d0[w0] = i == 0 ? gv : 0, d0[w0 + 1] = i == 1 ? gv : 0;                            \
                        d1[w0] = i == 2 ? gv : 0, d1[w0 + 1] = i == 3 ? gv : 0;                            \
                    }                                                                                      \
                }                                                                                          \
                for (; yw < ow; yw++) {                                                                    \
                    int64_t w0 = yw * k1, nw = w0 + k1 <= W ? k1 : W - w0, arg = h0 * W + w0;              \
                    if (nw <= 0) break;                                                                    \
                    T acc = LD(x[arg]);                                                                    \
                    for (int64_t a = 0; a < nh; a++)                                                       \
                        for (int64_t b = 0; b < nw; b++) {                                                 \
                            int64_t e = (h0 + a) * W + w0 + b;                                             \
                            T v = LD(x[e]);                                                                \
                            dx[e] = 0;                                                                     \
                            if (acc == acc && (v > acc || v != v)) acc = v, arg = e;                       \
                        }                                                                                  \
                    dx[arg] = g[yw];                                                                       \
                }                                                                                          \
                for (int64_t a = 0; a < nh; a++)                                                           \
                    for (int64_t e = cw; e < W; e++) dx[(h0 + a) * W + e] = 0;                             \
            }                                                                                              \
            for (int64_t e = ch * W; e < H * W; e++) dx[e] = 0;                                            \
        }                                                                                                  \
    }
#define LD_AS_IS(v) (v)
MAX_GRAD_TILED(max_grad_tiled_f32, float, float, f32, LD_AS_IS)
MAX_GRAD_TILED(max_grad_tiled_f64, double, double, f64, LD_AS_IS)
MAX_GRAD_TILED(max_grad_tiled_bf16, uint16_t, float, bf16, wf__bf2f)

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

/* f16/bf16 pools through the f32 loops a few planes at a time: each task converts its planes of x and dy
 * into buffers of its own (small enough to stay in cache) and the planes of dx back. Whole-tensor f32
 * copies had cost three large allocations per run, page faults included: a bf16 CNN's pooling gradient
 * ran 7x slower than the f32 one. f32 is exact for both (the max's compares and the average's sums
 * run in f32 as before). */
typedef struct lowp_pool {
    const pool_geom *r;
    wf__range_fn f32;
    wf_dtype t;
    int64_t x_plane, dy_plane, dx_plane; /* elements per plane; x_plane 0: no x */
    bool failed;                         /* a task's buffers could not be allocated */
} lowp_pool;

static void lowp_pool_planes(void *arg, int64_t p0, int64_t p1)
{
    lowp_pool *lp = arg;
    int64_t nx = lp->x_plane, ndy = lp->dy_plane, ndx = lp->dx_plane, per = nx + ndy + ndx;
    /* planes in chunks of about 128 KB: the conversions run long enough to vectorise well */
    int64_t chunk = per < 32768 ? 32768 / (per ? per : 1) : 1;
    if (chunk > p1 - p0) chunk = p1 - p0;
    float *buf = wf__aligned_alloc((size_t)(chunk * per + 1) * sizeof(float), WF__ALIGN);
    if (!buf) {
        __atomic_store_n(&lp->failed, true, __ATOMIC_RELAXED);
        return;
    }
    size_t es = wf_dtype_size(lp->t);
    pool_geom g = *lp->r;
    g.x = nx ? buf : NULL, g.dy = buf + chunk * nx, g.dx = buf + chunk * (nx + ndy);
    for (int64_t p = p0; p < p1; p += chunk) {
        int64_t n = p1 - p < chunk ? p1 - p : chunk;
        if (nx) wf__convert((const char *)lp->r->x + (size_t)(p * nx) * es, lp->t, buf, WF_F32, n * nx);
        wf__convert((const char *)lp->r->dy + (size_t)(p * ndy) * es, lp->t, (float *)g.dy, WF_F32, n * ndy);
        lp->f32(&g, 0, n);
        wf__convert(g.dx, WF_F32, (char *)lp->r->dx + (size_t)(p * ndx) * es, lp->t, n * ndx);
    }
    wf__aligned_free(buf);
}

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
    lowp_pool lp = {r, f32, t, planes ? (x ? x->size / planes : 0) : 0, planes ? dy->size / planes : 0,
                    planes ? y->size / planes : 0, false};
    wf__parallel_for(k, planes, grain, lowp_pool_planes, &lp);
    if (lp.failed)
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating f32 plane buffers (%lld floats) on CPU:0",
                             (long long)(lp.x_plane + lp.dy_plane + lp.dx_plane));
    return NULL;
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
    bool tiled = wn.s[0] == wn.k[0] && wn.s[1] == wn.k[1] && wn.d[0] == 1 && wn.d[1] == 1 && !wn.pb[0] && !wn.pb[1];
    if (tiled && x->dtype == WF_BF16) { /* in place, no f32 copies (max_grad_2x2_bf16) */
        int64_t planes = y->dims[0] * y->dims[1], per = 2 * r.h * r.w;
        r.x = x->data, r.dy = dy->data, r.dx = y->data;
        wf__parallel_for(k, planes, 32768 / (per + 1) + 1, max_grad_tiled_bf16, &r);
        return NULL;
    }
    if (tiled) return run_pool_loop(k, &r, x->dtype, x, dy, y, max_grad_tiled_f32, max_grad_tiled_f64);
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
    {"Conv2DBackpropInput", "CPU", WF__DT_FLOATS, 2, k_conv_bp_input, wf__dn_free_state, 0},
    {"Conv2DBackpropFilter", "CPU", WF__DT_FLOATS, 0, k_conv_bp_filter, wf__dn_free_state, 0},
    {"MaxPool2DGrad", "CPU", WF__DT_FLOATS, 0, k_max_pool_grad, NULL, 0},
    {"AvgPool2DGrad", "CPU", WF__DT_FLOATS, 1, k_avg_pool_grad, NULL, 0},
    {"GlobalAvgPoolGrad", "CPU", WF__DT_FLOATS, 1, k_gap_grad, NULL, 0},
    {0},
};
