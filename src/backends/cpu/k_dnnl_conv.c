/*
 * Conv2D on the CPU through a cached oneDNN convolution (f32 and bf16; f16 converts through f32; f64 is a
 * direct loop), and ConvTranspose2D as a direct scatter loop that is simple to prove right.
 */
#include "k_dnnl.h"
#include "k_elementwise.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- Conv2D ------------------------------------------------------------------------------------ */

typedef struct conv_geom {
    int64_t n, c, h, w, oc, g, kh, kw;
    wf__nn_window win;
} conv_geom;

/* The op's own bias input B; a fused bias or residual may have been appended at index 2 when B is absent. */
static const wf_tensor *conv_own_bias(const wf__kctx *k)
{
    return k->n_in > 2 && k->fused_bias != 2 && k->fused_residual != 2 ? k->in[2] : NULL;
}

static wf_status *conv_plan(wf__kctx *k, bool transposed, conv_geom *g)
{
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = conv_own_bias(k);
    char sx[160], sw[160];
    memset(g, 0, sizeof *g);
    if (x->rank != 4 || w->rank != 4)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s and W %s must be 4-D", wf__shape_str(x->rank, x->dims, sx),
                             wf__shape_str(w->rank, w->dims, sw));
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X is %s but W is %s", wf_dtype_name(x->dtype),
                             wf_dtype_name(w->dtype));
    g->n = x->dims[0], g->c = x->dims[1], g->h = x->dims[2], g->w = x->dims[3];
    g->g = wf__attr_i(k->op, k->attrs, "group");
    g->kh = w->dims[2], g->kw = w->dims[3];
    bool bad = g->g < 1 || g->c % g->g;
    if (!transposed) {
        g->oc = w->dims[0];
        bad = bad || g->oc % g->g || w->dims[1] * g->g != g->c;
    } else {
        g->oc = w->dims[1] * g->g;
        bad = bad || w->dims[0] != g->c;
    }
    if (bad)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s and group %lld do not match",
                             wf__shape_str(x->rank, x->dims, sx), wf__shape_str(w->rank, w->dims, sw), (long long)g->g);
    if (b && (b->rank != 1 || b->dims[0] != g->oc))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "B must be 1-D with %lld elements", (long long)g->oc);
    const wf_tensor *fb = transposed ? NULL : wf__dn_fused_bias(k);
    if (fb && (fb->rank != 1 || fb->dims[0] != g->oc || fb->dtype != x->dtype))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "fused bias must be 1-D %s with %lld elements",
                             wf_dtype_name(x->dtype), (long long)g->oc);
    char err[256];
    int64_t in_hw[2] = {g->h, g->w}, wk[2] = {g->kh, g->kw};
    if (wf__nn_window_resolve(k->op, k->attrs, transposed ? WF__WIN_CONVT : WF__WIN_CONV, in_hw, wk, &g->win, err,
                              sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s: %s", wf__shape_str(x->rank, x->dims, sx),
                             wf__shape_str(w->rank, w->dims, sw), err);
    return NULL;
}

/* Whether to let oneDNN choose the activation layout. On AVX2 (bench/bench_conv.c) its direct kernels on
 * the blocked nChw8c layout beat the gemm-based ones on plain NCHW by 1.5-10x for 3x3, 7x7 and depthwise
 * convolutions even with the reorders in and out; a stride-1 unpadded 1x1 convolution on plain NCHW is a
 * single GEMM without im2col, where the two activation reorders cost more than they save. */
static bool conv_wants_any(const conv_geom *g)
{
    const wf__nn_window *w = &g->win;
    bool pointwise = g->kh == 1 && g->kw == 1 && w->s[0] == 1 && w->s[1] == 1 && !w->pb[0] && !w->pb[1] &&
                     !w->pe[0] && !w->pe[1];
    /* Little work per output (input channels x taps below 32: a grey image's first 3x3 layer): on AVX-512
     * oneDNN's choice is brgconv on NHWC, and the reorder of its result back to NCHW costs more than the
     * convolution. bench_train_cnn's first layer, 64x1x28x28 to 32 channels: 1.43 ms + 2.0 ms of reorder,
     * against 1.6 ms for the gemm kernel on NCHW. ResNet-50's 7x7 stem over 3 channels (147 per output)
     * is the other way round: 1.43 + 0.5 ms against 4.3 ms, so it keeps oneDNN's choice. */
    if (g->g == 1 && g->c * g->kh * g->kw < 32) return false;
    return !(pointwise && g->g == 1);
}

typedef struct conv_build_arg {
    const conv_geom *g;
    dnnl_data_type_t dt;
    bool bias, any;
    bool in_blk, out_blk; /* the source is, the result is to be, in the blocked layout (level 3) */
    bool sum;             /* the result is added to what the destination holds (a fused residual) */
    int act;
    double alpha;
} conv_build_arg;

static wf_status *conv_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
{
    const conv_build_arg *ca = arg;
    const conv_geom *g = ca->g;
    dnnl_dims_t sd = {g->n, g->c, g->h, g->w}, dd = {g->n, g->oc, g->win.out[0], g->win.out[1]}, bd = {g->oc};
    dnnl_dims_t wd = {g->g, g->oc / g->g, g->c / g->g, g->kh, g->kw};
    int wnd = 5;
    if (g->g == 1) {
        wnd = 4;
        memmove(wd, wd + 1, 4 * sizeof wd[0]);
    }
    dnnl_dims_t strides = {g->win.s[0], g->win.s[1]}, dil = {g->win.d[0] - 1, g->win.d[1] - 1};
    dnnl_dims_t pl = {g->win.pb[0], g->win.pb[1]}, pr = {g->win.pe[0], g->win.pe[1]};
    dnnl_memory_desc_t wany, sany, dany;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st;
    /* a blocked source or result is given as such; the other side is then oneDNN's choice, reordered to
     * or from plain NCHW if it is not ours */
    dnnl_format_tag_t blk = wf__dn_blocked_tag(), free_tag = ca->any || ca->in_blk || ca->out_blk ? dnnl_format_tag_any
                                                                                                 : dnnl_abcd;
    const char *what = "convolution memory descriptor";
    if ((st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_SRC], 4, sd, ca->dt, ca->in_blk ? blk : dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_DST], 4, dd, ca->dt, ca->out_blk ? blk : dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&sany, 4, sd, ca->dt, ca->in_blk ? blk : free_tag)) ||
        (st = dnnl_memory_desc_init_by_tag(&dany, 4, dd, ca->dt, ca->out_blk ? blk : free_tag)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_WEI], wnd, wd, ca->dt, wnd == 5 ? dnnl_abcde : dnnl_abcd)) ||
        (st = dnnl_memory_desc_init_by_tag(&wany, wnd, wd, ca->dt, dnnl_format_tag_any)) ||
        (ca->bias && (st = dnnl_memory_desc_init_by_tag(&p->md[WF__DN_BIAS], 1, bd, ca->dt, dnnl_a))))
        goto fail;
    what = "convolution descriptor";
    if ((st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &sany,
                                                         &wany, ca->bias ? &p->md[WF__DN_BIAS] : NULL, &dany, strides,
                                                         dil, pl, pr)))
        goto fail;
    what = "convolution post-op";
    if ((st = wf__dn_attr_sum(ca->act, ca->alpha, ca->sum, &attr))) goto fail;
    what = "convolution primitive descriptor";
    if ((st = dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL))) goto fail;
    /* A plain source or result that is the same bytes in the primitive's layout (a squeeze-and-excitation
     * block's [1, C, 1, 1] vectors, C in whole channel blocks) is described in that layout: no reorder.
     * MobileNetV3-small ran nine such reorders a run (1-3 us each). */
    const dnnl_memory_desc_t *psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
                             *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (!dnnl_memory_desc_equal(psrc, &p->md[WF__DN_SRC]) && wf__dn_same_bytes(psrc, &p->md[WF__DN_SRC]))
        p->md[WF__DN_SRC] = *psrc;
    if (!dnnl_memory_desc_equal(pdst, &p->md[WF__DN_DST]) && wf__dn_same_bytes(pdst, &p->md[WF__DN_DST]))
        p->md[WF__DN_DST] = *pdst;
    /* A residual is summed by the primitive when it writes the destination's own layout; when its
     * result is reordered out (plain NCHW at level 2), by that reorder instead, so that what is added is
     * the residual's value at the same element. */
    bool sum_in_reorder = ca->sum && !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                                                              &p->md[WF__DN_DST]);
    if (sum_in_reorder) {
        dnnl_primitive_desc_destroy(pd);
        dnnl_primitive_attr_destroy(attr);
        pd = NULL;
        attr = NULL;
        what = "convolution post-op";
        if ((st = wf__dn_attr(ca->act, ca->alpha, &attr))) goto fail;
        what = "convolution primitive descriptor";
        if ((st = dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL))) goto fail;
    }
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->md[WF__DN_WEI_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    p->md[WF__DN_SRC_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    p->md[WF__DN_DST_PRIM] = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    what = "weight reorder";
    if (!dnnl_memory_desc_equal(&p->md[WF__DN_WEI_PRIM], &p->md[WF__DN_WEI]) &&
        (st = wf__dn_reorder_create(eng, &p->md[WF__DN_WEI], &p->md[WF__DN_WEI_PRIM], &p->wreorder, &p->wscratch)))
        goto fail;
    what = "source reorder";
    if (!dnnl_memory_desc_equal(&p->md[WF__DN_SRC_PRIM], &p->md[WF__DN_SRC]) &&
        (st = wf__dn_reorder_create(eng, &p->md[WF__DN_SRC], &p->md[WF__DN_SRC_PRIM], &p->sreorder, &p->sscratch)))
        goto fail;
    what = "destination reorder";
    if (!dnnl_memory_desc_equal(&p->md[WF__DN_DST_PRIM], &p->md[WF__DN_DST]) &&
        (st = wf__dn_reorder_create_sum(eng, &p->md[WF__DN_DST_PRIM], &p->md[WF__DN_DST], sum_in_reorder, &p->dreorder,
                                        &p->dscratch)))
        goto fail;
    what = "convolution primitive";
    st = dnnl_primitive_create(&p->prim, pd);
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st == dnnl_success ? NULL : wf__dn_fail(k, st, what);
}

/* wver: the content version of the weights w came from (0: none). sum: y holds a residual, to which the
 * convolution's result is added (before the activation). */
static wf_status *conv_dnnl(wf__kctx *k, const conv_geom *g, dnnl_data_type_t dt, const void *x, const void *w,
                            uint64_t wver, const void *bias, void *y, bool sum, int act, double alpha)
{
    /* level 3's layout (lower/layout.c): f32 only, where the lowering checked the channel counts */
    bool in_blk = dt == dnnl_f32 && (k->in_blocked & 1), out_blk = dt == dnnl_f32 && (k->out_blocked & 1);
    conv_build_arg ca = {g, dt, bias != NULL, conv_wants_any(g), in_blk, out_blk, sum, act, alpha};
    int64_t key[WF__DN_KEY_MAX];
    int nk = 0;
    key[nk++] = 'C';
    key[nk++] = dt;
    key[nk++] = bias != NULL;
    key[nk++] = ca.any;
    key[nk++] = in_blk | out_blk << 1 | sum << 2;
    key[nk++] = act;
    memcpy(&key[nk++], &alpha, sizeof alpha);
    const int64_t geo[] = {g->n, g->c, g->h, g->w, g->oc, g->g, g->kh, g->kw};
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) key[nk++] = geo[i];
    memcpy(&key[nk], &g->win, sizeof g->win);
    nk += (int)(sizeof g->win / sizeof(int64_t));
    wf__dn_prim *p;
    WF__TRY(wf__dn_acquire(k, key, nk, conv_build, &ca, &p));
    wf_status *s = NULL;
    wf__dn_run *r = NULL;
    void *wbuf = NULL, *sbuf = NULL, *dbuf = NULL, *abuf = NULL;
    bool wcached = false;
    if ((s = wf__dn_run_get(k, p, &r))) goto done;
    if (p->wreorder && (s = wf__dn_weights(k, p, r, w, wver, &wbuf, &wcached))) goto done;
    size_t sb = p->sreorder ? (dnnl_memory_desc_get_size(&p->md[WF__DN_SRC_PRIM]) + WF__ALIGN - 1) / WF__ALIGN * WF__ALIGN
                            : 0;
    size_t db = p->dreorder ? dnnl_memory_desc_get_size(&p->md[WF__DN_DST_PRIM]) : 0;
    if (sb + db) {
        if ((s = wf__dn_run_buf(k, r, WF__DN_BUF_ACT, sb + db, &abuf))) goto done;
        sbuf = p->sreorder ? abuf : NULL;
        dbuf = p->dreorder ? (char *)abuf + sb : NULL;
    }
    if (sbuf && (s = wf__dn_reorder(k, r, WF__DN_SLOT_SREORDER, p->sreorder, &p->md[WF__DN_SRC], x,
                                    &p->md[WF__DN_SRC_PRIM], sbuf, &p->sscratch)))
        goto done;
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    const dnnl_memory_desc_t *mds[4] = {&p->md[sbuf ? WF__DN_SRC_PRIM : WF__DN_SRC],
                                        &p->md[wbuf ? WF__DN_WEI_PRIM : WF__DN_WEI],
                                        &p->md[dbuf ? WF__DN_DST_PRIM : WF__DN_DST], &p->md[WF__DN_BIAS]};
    void *ptrs[4] = {sbuf ? sbuf : (void *)x, wbuf ? wbuf : (void *)w, dbuf ? dbuf : y, (void *)bias};
    if ((s = wf__dn_exec(k, r, WF__DN_SLOT_PRIM, p->prim, bias ? 4 : 3, ids, mds, ptrs, &p->scratch))) goto done;
    if (dbuf)
        s = wf__dn_reorder(k, r, WF__DN_SLOT_DREORDER, p->dreorder, &p->md[WF__DN_DST_PRIM], dbuf, &p->md[WF__DN_DST], y,
                           &p->dscratch);
    if (!s && !wf__dn_act_in_prim(act, alpha)) wf__dn_relu_pass(k, y, dt, g->n * g->oc * g->win.out[0] * g->win.out[1], act, alpha,
                                                                     k->fused_beta);
done:
    if (wbuf) wf__dn_weights_done(p, wcached);
    wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    return s;
}

typedef struct conv_ref_arg {
    const conv_geom *g;
    const double *x, *w, *b;
    double *y;
} conv_ref_arg;

/* f64 convolution, one output plane (n, oc) per step */
WF__VEC static void conv_ref_f64(void *arg, int64_t p0, int64_t p1)
{
    const conv_ref_arg *r = arg;
    const conv_geom *g = r->g;
    const wf__nn_window *wn = &g->win;
    int64_t oh = wn->out[0], ow = wn->out[1], icg = g->c / g->g, ocg = g->oc / g->g;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / g->oc, o = p % g->oc, grp = o / ocg;
        double *y = r->y + p * oh * ow;
        for (int64_t i = 0; i < oh * ow; i++) y[i] = r->b ? r->b[o] : 0.0;
        for (int64_t j = 0; j < icg; j++) {
            const double *xp = r->x + (n * g->c + grp * icg + j) * g->h * g->w;
            const double *wp = r->w + (o * icg + j) * g->kh * g->kw;
            for (int64_t a = 0; a < g->kh; a++)
                for (int64_t bb = 0; bb < g->kw; bb++) {
                    double wv = wp[a * g->kw + bb];
                    for (int64_t yh = 0; yh < oh; yh++) {
                        int64_t ih = yh * wn->s[0] - wn->pb[0] + a * wn->d[0];
                        if (ih < 0 || ih >= g->h) continue;
                        for (int64_t yw = 0; yw < ow; yw++) {
                            int64_t iw = yw * wn->s[1] - wn->pb[1] + bb * wn->d[1];
                            if (iw >= 0 && iw < g->w) y[yh * ow + yw] += wv * xp[ih * g->w + iw];
                        }
                    }
                }
        }
    }
}

/*
 * Depthwise 3x3 convolution (one input channel a group, stride 1 or 2, no dilation, any padding) on plain
 * NCHW f32, directly. oneDNN's depthwise kernel works on channel blocks, so on plain NCHW it came with a
 * reorder in and one out, and with a channel count that fills no whole block (ShuffleNetV2's 58, 116 and
 * 232) those reorders into padded blocks cost more than the convolution: 116x14x14, Zen 3, 2 threads, P10
 * of 30 runs: reorder in 7-8 us, convolution 10, reorder out 6-9. Here each plane is copied once into a
 * zero-bordered buffer (for stride 2 split into even and odd columns), and a row of outputs is eight at a
 * time of nine fused multiply-adds from that buffer, without a branch. A padded tap adds 0 x w, which is
 * NaN for an infinite or NaN w where oneDNN and the reference skip the tap, so a plane whose weights are
 * not all finite takes the reference's loop (conv_dw_exact).
 */
typedef struct conv_dw_arg {
    const conv_geom *g;
    const float *x, *w, *b;
    float *y;
    int64_t pw;   /* floats a buffer row holds */
    bool failed;  /* a task's buffer could not be allocated */
} conv_dw_arg;

typedef float conv_v8 __attribute__((vector_size(32), aligned(4)));
/* the even and the odd elements of two vectors (GCC's and clang's spellings; the fuzz build is clang's) */
#if defined(__clang__)
#define CONV_EVEN(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define CONV_ODD(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15)
#else
typedef int32_t conv_vi8 __attribute__((vector_size(32)));
#define CONV_EVEN(a, b) __builtin_shuffle(a, b, (conv_vi8){0, 2, 4, 6, 8, 10, 12, 14})
#define CONV_ODD(a, b) __builtin_shuffle(a, b, (conv_vi8){1, 3, 5, 7, 9, 11, 13, 15})
#endif

/* output plane p (n * C + c) by skipping the taps outside the input, as conv_ref_f64 does */
static void conv_dw_exact(const conv_dw_arg *r, int64_t p)
{
    const conv_geom *g = r->g;
    const wf__nn_window *wn = &g->win;
    int64_t oh = wn->out[0], ow = wn->out[1], c = p % g->c;
    const float *xp = r->x + p * g->h * g->w, *wp = r->w + c * 9;
    float *y = r->y + p * oh * ow;
    for (int64_t yh = 0; yh < oh; yh++)
        for (int64_t yw = 0; yw < ow; yw++) {
            float acc = r->b ? r->b[c] : 0.0f;
            for (int a = 0; a < 3; a++) {
                int64_t ih = yh * wn->s[0] - wn->pb[0] + a;
                if (ih < 0 || ih >= g->h) continue;
                for (int b = 0; b < 3; b++) {
                    int64_t iw = yw * wn->s[1] - wn->pb[1] + b;
                    if (iw >= 0 && iw < g->w) acc += wp[a * 3 + b] * xp[ih * g->w + iw];
                }
            }
            y[yh * ow + yw] = acc;
        }
}

WF__VEC static void conv_dw_range(void *arg, int64_t p0, int64_t p1)
{
    conv_dw_arg *r = arg;
    const conv_geom *g = r->g;
    const wf__nn_window *wn = &g->win;
    const int64_t H = g->h, W = g->w, oh = wn->out[0], ow = wn->out[1], s = wn->s[1], pt = wn->pb[0], pl = wn->pb[1];
    const int64_t PW = r->pw, rows = (oh - 1) * wn->s[0] + 3;
    float *buf = wf__aligned_alloc(sizeof(float) * (size_t)((rows + 1) * PW + 8), WF__ALIGN);
    if (!buf) {
        __atomic_store_n(&r->failed, true, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t p = p0; p < p1; p++) {
        int64_t c = p % g->c;
        const float *xp = r->x + p * H * W, *wp = r->w + c * 9;
        float *y = r->y + p * oh * ow;
        bool finite = true;
        for (int i = 0; i < 9; i++) finite = finite && isfinite(wp[i]);
        if (!finite) {
            conv_dw_exact(r, p);
            continue;
        }
        /* buffer row j holds input row j - pt, zero outside; stride 1: column q is input column q - pl;
         * stride 2: the first half the even columns of that padded row, the second half the odd ones
         * (made in the last PW floats of the buffer first). Copies are vector loops: memcpy's call per
         * row of 14-56 floats was 7% of ShuffleNetV2's samples. */
        int64_t half = PW / 2;
        float *tmp = buf + rows * PW;
        for (int64_t j = 0; j < rows; j++) {
            float *row = buf + j * PW;
            int64_t ih = j - pt;
            float *dst = s == 1 ? row : tmp;
            for (int64_t q = 0; q < PW; q += 8) *(conv_v8 *)(dst + q) = (conv_v8){0};
            if (ih >= 0 && ih < H) {
                /* PW >= pl + W (conv_dw sizes it so); the min only guards the copy */
                const float *src = xp + ih * W;
                int64_t n = W < PW - pl ? W : PW - pl, q = 0;
                for (; q + 8 <= n; q += 8) *(conv_v8 *)(dst + pl + q) = *(const conv_v8 *)(src + q);
                for (; q < n; q++) dst[pl + q] = src[q];
            }
            if (s == 2)
                for (int64_t q = 0; q < half; q += 8) {
                    conv_v8 lo = *(const conv_v8 *)(tmp + 2 * q), hi = *(const conv_v8 *)(tmp + 2 * q + 8);
                    *(conv_v8 *)(row + q) = CONV_EVEN(lo, hi);
                    *(conv_v8 *)(row + half + q) = CONV_ODD(lo, hi);
                }
        }
        const float bias = r->b ? r->b[c] : 0.0f;
        const float w0 = wp[0], w1 = wp[1], w2 = wp[2], w3 = wp[3], w4 = wp[4], w5 = wp[5], w6 = wp[6], w7 = wp[7],
                    w8 = wp[8];
        const int64_t o1 = s == 1 ? 1 : half, o2 = s == 1 ? 2 : 1; /* the middle and right taps' offsets */
        for (int64_t yh = 0; yh < oh; yh++) {
            const float *r0 = buf + yh * wn->s[0] * PW, *r1 = r0 + PW, *r2 = r1 + PW;
            float *yr = y + yh * ow;
            for (int64_t x0 = 0; x0 < ow; x0 += 8) {
#define DW_LD(p) (*(const conv_v8 *)(p))
                conv_v8 acc = (conv_v8){0} + bias;
                acc += w0 * DW_LD(r0 + x0) + w1 * DW_LD(r0 + x0 + o1) + w2 * DW_LD(r0 + x0 + o2);
                acc += w3 * DW_LD(r1 + x0) + w4 * DW_LD(r1 + x0 + o1) + w5 * DW_LD(r1 + x0 + o2);
                acc += w6 * DW_LD(r2 + x0) + w7 * DW_LD(r2 + x0 + o1) + w8 * DW_LD(r2 + x0 + o2);
#undef DW_LD
                /* a row's last vector may run into the next row, which is written after it; not the plane's
                 * last row (the next plane may be another thread's) */
                if (x0 + 8 <= ow || yh + 1 < oh) {
                    *(conv_v8 *)(yr + x0) = acc;
                } else {
                    float tail[8];
                    memcpy(tail, &acc, sizeof tail);
                    for (int64_t q = 0; q < ow - x0; q++) yr[x0 + q] = tail[q];
                }
            }
        }
    }
    wf__aligned_free(buf);
}

/* Whether conv_dw_range computes this convolution (f32 on plain NCHW, no residual): where its rows hold a
 * whole vector at least, and at stride 2 only where the channels fill no whole block (oneDNN's reorders
 * then pad). Against oneDNN with its reorders, level 2 (plain NCHW), 2 threads, Zen 3, chains of the same
 * layer: 32x112x112 0.55 against 1.1-1.35 ms for three; 144x56x56 0.6-0.7 against 0.85-1.1 for three;
 * 58x28x28 0.22 against 0.50 for six; but 576x7x7 0.40 against 0.14-0.18 for six (a row of 7 is one
 * partial vector, and the plane's set-up is the work) and 96x112x112 at stride 2 0.48 against 0.37-0.40
 * for two. WEFT_CPU_DWCONV (set) keeps oneDNN's path (tests, benchmarks). */
static bool conv_dw_takes(const wf__kctx *k, const conv_geom *g, wf_dtype t, bool res)
{
    /* read once: this runs at every convolution */
    static atomic_int off = -1;
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) atomic_store_explicit(&off, o = getenv("WEFT_CPU_DWCONV") != NULL, memory_order_relaxed);
    const wf__nn_window *wn = &g->win;
    return t == WF_F32 && !res && !(k->in_blocked & 1) && !(k->out_blocked & 1) && g->g == g->c && g->oc == g->c &&
           g->kh == 3 && g->kw == 3 && wn->d[0] == 1 && wn->d[1] == 1 && wn->s[0] == wn->s[1] &&
           (wn->s[0] == 1 || wn->s[0] == 2) && wn->pb[0] >= 0 && wn->pb[1] >= 0 && wn->pe[0] >= 0 && wn->pe[1] >= 0 &&
           wn->out[0] > 0 && wn->out[1] >= 8 && (wn->s[0] == 1 || g->c % wf__dn_channel_block()) && !o;
}

static wf_status *conv_dw(wf__kctx *k, const conv_geom *g, const float *x, const float *w, const float *bias, float *y)
{
    const wf__nn_window *wn = &g->win;
    int64_t ow8 = (wn->out[1] + 7) / 8 * 8;
    /* stride 1: columns up to ow8 + 2 read; stride 2: even and odd halves of ow8 + 1 each; both rounded up
     * to whole vectors (and the input's pl + W columns fit: ow8 + 8 > ow + 2 >= pl + W at stride 1, and
     * 2 (ow8 + 8) > 2 ow + 2 >= pl + W at stride 2) */
    int64_t pw = wn->s[1] == 1 ? ow8 + 8 : 2 * (ow8 + 8); /* whole vectors: the zeroing and the even/odd split */
    conv_dw_arg r = {g, x, w, bias, y, pw, false};
    int64_t per = wn->out[0] * wn->out[1] * 9;
    wf__parallel_for(k, g->n * g->c, 32768 / (per + 1) + 1, conv_dw_range, &r);
    if (r.failed)
        return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating a %lld-float plane buffer on CPU:0",
                             (long long)(pw * ((wn->out[0] - 1) * wn->s[0] + 4)));
    return NULL;
}

/*
 * A 1x1 convolution over 1x1 maps, y[n] = W x[n] + b: a squeeze-and-excitation block's two convolutions
 * at batch 1 (EfficientNet-B0's 32 from 4 to 1152 channels, MobileNetV3-small's 18), dot products of W's
 * rows with x. oneDNN's primitive took 6-24 us a call there (traced minima, EfficientNet-B0 on Zen 3),
 * mostly its own set-up for a few thousand multiply-adds. The bytes of an [N, C, 1, 1] value are the same
 * in the blocked layout (whole channel blocks, lower/layout.c), so either layout is read and written as
 * it is. f32, ungrouped; the residual, if fused, is in y already; WEFT_CPU_CONV_GEMV=0 keeps oneDNN's path
 * (tests, measurements).
 */
static atomic_int_least64_t g_gemv_runs;

int64_t wf__conv_gemv_runs(void) { return atomic_load(&g_gemv_runs); }

static bool conv_gemv_takes(const conv_geom *g, wf_dtype t)
{
    static atomic_int off = -1;
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) {
        const char *e = getenv("WEFT_CPU_CONV_GEMV");
        atomic_store_explicit(&off, o = e && !strcmp(e, "0"), memory_order_relaxed);
    }
    return !o && t == WF_F32 && g->g == 1 && g->c > 0 && g->kh == 1 && g->kw == 1 && g->h == 1 && g->w == 1 &&
           g->win.out[0] == 1 && g->win.out[1] == 1;
}

typedef struct conv_gemv_arg {
    const conv_geom *g;
    const float *x, *w, *b;
    float *y;
    bool sum;
} conv_gemv_arg;

WF__VEC static void conv_gemv_range(void *arg, int64_t r0, int64_t r1)
{
    const conv_gemv_arg *a = arg;
    int64_t C = a->g->c, O = a->g->oc;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r / O * C, *w = a->w + r % O * C;
        float acc = 0;
        _Pragma("omp simd reduction(+ : acc)") for (int64_t c = 0; c < C; c++) acc += w[c] * x[c];
        a->y[r] = (a->sum ? a->y[r] : 0.0f) + (a->b ? a->b[r % O] : 0.0f) + acc;
    }
}

/* The fused activation over n values of y: weft's own passes (wf__dn_relu_pass's forms; Sigmoid and Tanh
 * the nodes' vector loops) */
static void conv_act(wf__kctx *k, float *y, int64_t n, int act, double alpha, double beta)
{
    wf__ew_unary u;
    if (act == WF__ACT_NONE) return;
    if (act != WF__ACT_SIGMOID && act != WF__ACT_TANH) wf__dn_relu_pass(k, y, dnnl_f32, n, act, alpha, beta);
    else if (wf__ew_unary_f32(act == WF__ACT_SIGMOID ? "Sigmoid" : "Tanh", 0, 0, &u)) u.call(&u, y, y, n);
    else wf__dn_epilogue(y, WF_F32, 1, n, 1, NULL, act, alpha, beta); /* the scalar form */
}

static void conv_gemv(wf__kctx *k, const conv_geom *g, const float *x, const float *w, const float *bias, float *y,
                      bool sum, int act)
{
    conv_gemv_arg a = {g, x, w, bias, y, sum};
    wf__parallel_for(k, g->n * g->oc, 16384 / (g->c + 1) + 1, conv_gemv_range, &a);
    conv_act(k, y, g->n * g->oc, act, k->fused_alpha, k->fused_beta);
    atomic_fetch_add(&g_gemv_runs, 1);
}

/*
 * A 1x1 convolution at a stride above 1 with no padding reads only every s-th row and column: it is the
 * same convolution at stride 1 over the subsampled input. oneDNN 2.6's strided 1x1 kernels ran well
 * below its stride-1 rate on AVX-512 (ResNet-50's layer3 downsample, 512 -> 1024 from 28x28 to 14x14:
 * 2.4-2.7 ms against 1.1-1.4 for ONNX Runtime and 1.1 for the stride-1 convolution of the 14x14 input, 2
 * Zen 5 threads), so the input is gathered (in its own layout: plain NCHW, nhwc or nChw{8,16}c) into a
 * scratch buffer and the stride-1 primitive runs on it: that layer 2.3 -> 1.2 ms as a one-node model, 1662
 * -> 1015 us (traced minima) inside ResNet-50 at level 3 (nhwc); its other downsamples (28x28 and 7x7
 * outputs) stay within 3%. f32, ungrouped; WEFT_CPU_CONV_SUB=0 keeps oneDNN's strided kernel (tests,
 * measurements). The gather runs on the calling thread: the same copy through wf__parallel_for left the
 * one-node model's median at 2.0 ms (p10 1.17), the primitive that follows often running on one thread.
 */
static atomic_int_least64_t g_sub_runs;

int64_t wf__conv_sub_runs(void) { return atomic_load(&g_sub_runs); }

static bool conv_sub_takes(const conv_geom *g)
{
    static atomic_int off = -1;
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) {
        const char *e = getenv("WEFT_CPU_CONV_SUB");
        atomic_store_explicit(&off, o = e && !strcmp(e, "0"), memory_order_relaxed);
    }
    const wf__nn_window *wn = &g->win;
    return !o && g->g == 1 && g->kh == 1 && g->kw == 1 && (wn->s[0] > 1 || wn->s[1] > 1) && !wn->pb[0] && !wn->pb[1] &&
           !wn->pe[0] && !wn->pe[1] && wn->out[0] > 0 && wn->out[1] > 0;
}

typedef struct conv_sub_arg {
    const conv_geom *g;
    const float *x;
    float *xs;
    int64_t planes, grp; /* planes of (n, channel or channel block) or, nhwc, images; floats a pixel holds */
} conv_sub_arg;

/* rows [b, e) of the subsampled input: a row is one output row of one plane */
static void conv_sub_range(void *arg, int64_t b, int64_t e)
{
    const conv_sub_arg *a = arg;
    const conv_geom *g = a->g;
    const int64_t oh = g->win.out[0], ow = g->win.out[1], s0 = g->win.s[0], s1 = g->win.s[1], G = a->grp;
    for (int64_t r = b; r < e; r++) {
        int64_t p = r / oh, i = r % oh;
        const float *src = a->x + ((p * g->h + i * s0) * g->w) * G;
        float *dst = a->xs + (p * oh + i) * ow * G;
        if (G == 1) {
            for (int64_t j = 0; j < ow; j++) dst[j] = src[j * s1];
        } else {
            for (int64_t j = 0; j < ow; j++) memcpy(dst + j * G, src + j * s1 * G, (size_t)G * sizeof(float));
        }
    }
}

static wf_status *conv_sub(wf__kctx *k, const conv_geom *g, const float *x, const float *w, uint64_t wver,
                           const float *bias, float *y, bool sum, int act)
{
    /* the source's layout: level 3's blocked one (k->in_blocked) or plain NCHW */
    int64_t planes = g->n * g->c, grp = 1;
    if (k->in_blocked & 1) {
        int cb = wf__dn_channel_block();
        if (cb == 1) planes = g->n, grp = g->c;                           /* nhwc: a pixel's C values */
        else planes = g->n * ((g->c + cb - 1) / cb), grp = cb;            /* nChw{cb}c: a pixel's block */
    }
    const int64_t oh = g->win.out[0], ow = g->win.out[1];
    float *xs;
    WF__TRY(wf__dn_alloc_f32(k, planes * oh * ow * grp, &xs));
    conv_sub_arg a = {g, x, xs, planes, grp};
    conv_sub_range(&a, 0, planes * oh);
    conv_geom g1 = *g;
    g1.h = oh, g1.w = ow;
    g1.win.s[0] = g1.win.s[1] = 1;
    wf_status *s = conv_dnnl(k, &g1, dnnl_f32, xs, w, wver, bias, y, sum, act, k->fused_alpha);
    wf__dn_tmp_free(xs);
    if (!s) atomic_fetch_add(&g_sub_runs, 1);
    return s;
}

wf_status *wf__dn_k_conv(wf__kctx *k)
{
    conv_geom g;
    WF__TRY(conv_plan(k, false, &g));
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = conv_own_bias(k), *fb = wf__dn_fused_bias(k);
    wf_dtype t = x->dtype;
    int64_t od[4] = {g.n, g.oc, g.win.out[0], g.win.out[1]};
    wf_tensor *y;
    /* A fused residual (lower/plan.c, f32 with Relu at most after it) is copied into the output, unless
     * the output already is the residual's bytes (planned in place, or its last reference), and the
     * convolution adds its result there. */
    const wf_tensor *res = k->fused_residual > 0 && k->fused_residual < k->n_in ? k->in[k->fused_residual] : NULL;
    if (res) {
        char sr[160], so[160];
        const char *why = res->dtype != t || res->rank != 4 || memcmp(res->dims, od, sizeof od) ? "its dtype or shape"
                          : t != WF_F32 ? "not f32"
                          : k->fused_act != WF__ACT_NONE && wf__dn_act_in_prim(k->fused_act, k->fused_alpha)
                              ? "an activation inside the primitive"
                          : ((k->in_blocked >> k->fused_residual) & 1) != (k->out_blocked & 1) ? "another layout"
                                                                                                : NULL;
        if (why)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "the fused residual %s%s cannot be added to the result %s%s (%s)",
                                 wf_dtype_name(res->dtype), wf__shape_str(res->rank, res->dims, sr), wf_dtype_name(t),
                                 wf__shape_str(4, od, so), why);
        bool reused;
        WF__TRY(wf__kctx_output_reuse(k, 0, k->fused_residual, t, 4, od, &y, &reused));
        if (!reused && y->bytes) memcpy(y->data, res->data, y->bytes);
    } else {
        WF__TRY(wf__kctx_output(k, 0, t, 4, od, &y));
    }
    if (!y->size) return NULL;
    /* B and a fused bias together become one bias vector */
    void *bsum = NULL;
    const void *bias = b ? b->data : fb ? fb->data : NULL;
    if (b && fb) {
        if (!(bsum = wf__aligned_alloc((size_t)g.oc * wf_dtype_size(t), WF__ALIGN)))
            return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory allocating a bias on CPU:0");
        for (int64_t i = 0; i < g.oc; i++)
            wf__store_f64(bsum, t, i, wf__load_f64(b->data, t, i) + wf__load_f64(fb->data, t, i));
        bias = bsum;
    }
    wf_status *s = NULL;
    int act = k->fused_act;
    if (g.c == 0) {
        /* no input channels: the output is the bias (plus the residual it holds) */
        if (!res) memset(y->data, 0, y->bytes);
        wf__dn_epilogue(y->data, t, g.n, g.oc, od[2] * od[3], bias, act, k->fused_alpha, k->fused_beta);
    } else if (conv_gemv_takes(&g, t)) {
        conv_gemv(k, &g, x->data, w->data, bias, y->data, res != NULL, act);
    } else if (conv_dw_takes(k, &g, t, res != NULL)) {
        if (!(s = conv_dw(k, &g, x->data, w->data, bias, y->data)))
            wf__dn_epilogue(y->data, t, g.n, g.oc, od[2] * od[3], NULL, act, k->fused_alpha, k->fused_beta);
    } else if (t == WF_F64) {
        conv_ref_arg r = {&g, x->data, w->data, bias, y->data};
        int64_t per = od[2] * od[3] * (g.c / g.g) * g.kh * g.kw;
        wf__parallel_for(k, g.n * g.oc, 32768 / (per + 1) + 1, conv_ref_f64, &r);
        wf__dn_epilogue(y->data, t, g.n, g.oc, od[2] * od[3], NULL, act, k->fused_alpha, k->fused_beta);
    } else {
        /* bf16 with fewer than 8 input channels per group (an image's first layer) runs in f32: oneDNN has
         * no brgemm kernel for it and takes an im2col GEMM, which ran the Fashion-MNIST CNN's 1 -> 32
         * layer 1.5x slower than f32 */
        if (t == WF_F32) {
            wf__conv_gemm_geom cg = {g.n, g.c, g.h, g.w, g.oc, g.win.out[0], g.win.out[1], g.kh, g.kw, g.win};
            bool cdone = false;
            if (g.g == 1 && wf__conv_gemm_takes(k, &cg) &&
                ((s = wf__conv_gemm(k, &cg, x->data, w->data, w->version, bias, y->data, res != NULL, act, &cdone)) ||
                 cdone))
                goto done;
            wf__wino_geom wg = {g.n, g.c, g.h, g.w, g.oc, g.win.out[0], g.win.out[1], g.win.pb[0], g.win.pb[1]};
            bool wdone = false;
            if (wf__wino_takes(k, &wg, g.g, g.kh, g.kw, &g.win) &&
                ((s = wf__wino_conv(k, &wg, x->data, w->data, w->version, bias, y->data, res != NULL, act,
                                    k->fused_alpha, k->fused_beta, &wdone)) || wdone))
                goto done;
        }
        if (t == WF_F32 && conv_sub_takes(&g)) {
            s = conv_sub(k, &g, x->data, w->data, w->version, bias, y->data, res != NULL, act);
            goto done;
        }
        if (t == WF_F32 || (t == WF_BF16 && g.c / g.g >= 8)) {
            s = conv_dnnl(k, &g, wf__dn_dtype(t), x->data, w->data, w->version, bias, y->data, res != NULL, act,
                          k->fused_alpha);
            if (t == WF_F32 || !s || wf_status_code(s) != WF_UNIMPLEMENTED) goto done;
            wf_status_free(s);
        }
        float *fx = NULL, *fw = NULL, *fbias = NULL, *fy = NULL;
        if (!(s = wf__dn_to_f32(k, x->data, t, x->size, &fx)) && !(s = wf__dn_to_f32(k, w->data, t, w->size, &fw)) &&
            !(s = wf__dn_to_f32(k, bias, t, g.oc, &fbias)) && !(s = wf__dn_alloc_f32(k, y->size, &fy)) &&
            !(s = conv_dnnl(k, &g, dnnl_f32, fx, fw, w->version, fbias, fy, false,
                            wf__dn_act_in_prim(act, k->fused_alpha) ? act : WF__ACT_NONE, k->fused_alpha)))
            /* the activation oneDNN does not take (Relu: NaN) in the pass back to t, not a pass of its own */
            wf__dn_from_f32(k, fy, y->data, t, y->size, wf__dn_act_in_prim(act, k->fused_alpha) ? WF__ACT_NONE : act,
                            k->fused_alpha, k->fused_beta);
        wf__dn_tmp_free(fx);
        wf__dn_tmp_free(fw);
        wf__dn_tmp_free(fbias);
        wf__dn_tmp_free(fy);
    }
done:
    wf__aligned_free(bsum);
    return s;
}

/* ---- ConvTranspose2D: direct scatter, one output plane per step so planes never race -------------- */

typedef struct convt_arg {
    const conv_geom *g;
    const void *x, *w, *b;
    void *y;
} convt_arg;

#define CONVT_LOOP(NAME, T)                                                                                \
    WF__VEC static void NAME(void *arg, int64_t p0, int64_t p1)                                            \
    {                                                                                                      \
        const convt_arg *r = arg;                                                                          \
        const conv_geom *g = r->g;                                                                         \
        const wf__nn_window *wn = &g->win;                                                                 \
        const T *X = r->x, *W = r->w, *B = r->b;                                                           \
        int64_t oh = wn->out[0], ow = wn->out[1], icg = g->c / g->g, ocg = g->oc / g->g;                   \
        for (int64_t p = p0; p < p1; p++) {                                                                \
            int64_t n = p / g->oc, o = p % g->oc, grp = o / ocg, oo = o % ocg;                             \
            T *y = (T *)r->y + p * oh * ow;                                                                \
            for (int64_t i = 0; i < oh * ow; i++) y[i] = B ? B[o] : (T)0;                                  \
            for (int64_t j = 0; j < icg; j++) {                                                            \
                int64_t ic = grp * icg + j;                                                                \
                const T *xp = X + (n * g->c + ic) * g->h * g->w;                                           \
                const T *wp = W + (ic * ocg + oo) * g->kh * g->kw;                                         \
                for (int64_t a = 0; a < g->kh; a++)                                                        \
                    for (int64_t bb = 0; bb < g->kw; bb++) {                                               \
                        T wv = wp[a * g->kw + bb];                                                         \
                        for (int64_t ih = 0; ih < g->h; ih++) {                                            \
                            int64_t yh = ih * wn->s[0] - wn->pb[0] + a * wn->d[0];                         \
                            if (yh < 0 || yh >= oh) continue;                                              \
                            for (int64_t iw = 0; iw < g->w; iw++) {                                        \
                                int64_t yw = iw * wn->s[1] - wn->pb[1] + bb * wn->d[1];                    \
                                if (yw >= 0 && yw < ow) y[yh * ow + yw] += wv * xp[ih * g->w + iw];        \
                            }                                                                              \
                        }                                                                                  \
                    }                                                                                      \
            }                                                                                              \
        }                                                                                                  \
    }
CONVT_LOOP(convt_f32, float)
CONVT_LOOP(convt_f64, double)

wf_status *wf__dn_k_convt(wf__kctx *k)
{
    conv_geom g;
    WF__TRY(conv_plan(k, true, &g));
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = conv_own_bias(k);
    wf_dtype t = x->dtype;
    int64_t od[4] = {g.n, g.oc, g.win.out[0], g.win.out[1]};
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, t, 4, od, &y));
    if (!y->size) return NULL;
    int64_t per = (g.c / g.g) * g.h * g.w * g.kh * g.kw;
    int64_t grain = 32768 / (per + 1) + 1;
    if (t == WF_F32 || t == WF_F64) {
        convt_arg r = {&g, x->data, w->data, b ? b->data : NULL, y->data};
        wf__parallel_for(k, g.n * g.oc, grain, t == WF_F32 ? convt_f32 : convt_f64, &r);
        return NULL;
    }
    float *fx = NULL, *fw = NULL, *fb = NULL, *fy = NULL;
    wf_status *s;
    if (!(s = wf__dn_to_f32(k, x->data, t, x->size, &fx)) && !(s = wf__dn_to_f32(k, w->data, t, w->size, &fw)) &&
        !(s = wf__dn_to_f32(k, b ? b->data : NULL, t, g.oc, &fb)) && !(s = wf__dn_alloc_f32(k, y->size, &fy))) {
        convt_arg r = {&g, fx, fw, fb, fy};
        wf__parallel_for(k, g.n * g.oc, grain, convt_f32, &r);
        wf__convert(fy, WF_F32, y->data, t, y->size);
    }
    wf__dn_tmp_free(fx);
    wf__dn_tmp_free(fw);
    wf__dn_tmp_free(fb);
    wf__dn_tmp_free(fy);
    return s;
}

