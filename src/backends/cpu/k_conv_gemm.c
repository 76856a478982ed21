/*
 * f32 convolutions over small output maps (N OH OW <= CONV_GEMM_MAX_PIXELS: 7x7 at batch 1) as one GEMM
 * through oneDNN's packed sgemm, on either layout (plain NCHW or level 3's nChw8c / nChw16c).
 *
 * oneDNN 2.6's direct jit:avx2 kernels block the output width by a few columns, so a 7-column map leaves
 * much of a register tile idle: on the 2-core Zen 3, ResNet-50's 512 -> 512 3x3 convolution at 7x7 alone
 * took 2.1-2.6 ms (ONNX Runtime 1.2-1.5 ms). As one product, Y^T [O x N P] = W' [O x K] Col [K x N P]
 * (K = C kh kw), oneDNN's sgemm with W' packed once per weight version runs it at 175-185 GFLOP/s alone
 * (1.25 ms) and 1.24 ms inside the model, plus 50 us to gather Col and 30 us to write y.
 *
 * Which convolutions (CONV_GEMM_MIN_OC, CONV_GEMM_MIN_K), from traced node minima, 8 interleaved runs a
 * side, WEFT_CPU_CONV_GEMM=0 against this: GoogLeNet's inception 5a/5b 3x3 160 -> 320 397 -> 285 us and
 * 192 -> 384 503 -> 398, its 832 -> 384 1x1 226 -> 203; ShuffleNetV2's 464 -> 1024 420 -> 332; ResNet-50
 * whole, medians of 8 pairs of 30 runs, 3.8-4.9% faster (0.9% in a noisier spell). With fewer output
 * channels the product loses: DenseNet-121's block 4 (1x1 to 128 channels, 10 us slower a layer; 3x3 128 ->
 * 32, 32 -> 49 us) made the model 6% slower, EfficientNet-B0's 1152 -> 192 and 672 -> 192 no faster; its
 * 1152 -> 320 and 320 -> 1280, and 5a's 832 -> 256, come out even within the noise.
 *
 * Col holds each output pixel's K input values, tap by tap and channel after channel within a tap (so a
 * blocked input is copied a channel block at a time; zeros where the tap falls in the padding), and W' the
 * weights in that order. The product lands pixel-major ([N P][O]); one pass then writes it to y in y's
 * layout with the bias, the fused residual (what y holds) and a Relu; other activations follow as the
 * direct path's passes. A weight that is not finite sends the convolution to the direct kernel: oneDNN's
 * skips the padding's taps, where 0 x Inf would be NaN here. WEFT_CPU_CONV_GEMM=0 turns it off (tests,
 * A/B measurements).
 */
#include "k_dnnl.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CONV_GEMM_MAX_PIXELS 64
#define CONV_GEMM_MIN_OC 256
#define CONV_GEMM_MIN_K 256

static atomic_int_least64_t g_gemm_runs;
int64_t wf__conv_gemm_runs(void) { return atomic_load(&g_gemm_runs); }

bool wf__conv_gemm_takes(const wf__kctx *k, const wf__conv_gemm_geom *g)
{
    static atomic_int off = -1;
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) {
        const char *e = getenv("WEFT_CPU_CONV_GEMM");
        atomic_store_explicit(&off, o = e && !strcmp(e, "0"), memory_order_relaxed);
    }
    int64_t px = g->n * g->oh * g->ow, kk = g->c * g->kh * g->kw;
    bool blocked = (k->in_blocked & 1) || (k->out_blocked & 1);
    int cb = wf__dn_channel_block();
    return !o && px > 0 && px <= CONV_GEMM_MAX_PIXELS && g->oc >= CONV_GEMM_MIN_OC && kk >= CONV_GEMM_MIN_K &&
           (!blocked || (wf__dn_blocked_tag() != dnnl_acdb && cb > 1 && g->c % cb == 0 && g->oc % cb == 0)) &&
           wf__mm_gpack_linked();
}

typedef struct cg_pack_arg {
    const wf__conv_gemm_geom *g;
    const float *w;
    const wf__dn_prim *p; /* its threads and gpack (the packed bytes) */
} cg_pack_arg;

/* W [O][C][kh][kw] to W' [O][kh kw][C], packed; the float after the packed bytes is 1 when a weight is not
 * finite. */
static wf_status *cg_pack(wf__kctx *k, void *arg, void *dst)
{
    const cg_pack_arg *a = arg;
    const wf__conv_gemm_geom *g = a->g;
    int64_t T = g->kh * g->kw, C = g->c, O = g->oc, K = C * T, px = g->n * g->oh * g->ow;
    float *wt = wf__aligned_alloc(sizeof(float) * (size_t)(O * K), WF__ALIGN);
    if (!wt) return wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory reordering %lld weights on CPU:0", (long long)(O * K));
    bool bad = false;
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < T; t++) {
                float v = a->w[(o * C + c) * T + t];
                bad |= !isfinite(v);
                wt[o * K + t * C + c] = v;
            }
    omp_set_num_threads(a->p->threads);
    int st = wf__sgemm_w_pack(O, px, K, wt, dst);
    omp_set_num_threads(1);
    wf__aligned_free(wt);
    if (st)
        return wf__kctx_fail(k, WF_INTERNAL, "oneDNN's GEMM packing of the weights [%lld, %lld] failed (status %d)",
                             (long long)O, (long long)K, st);
    *(float *)((char *)dst + a->p->gpack) = bad ? 1.0f : 0.0f;
    return NULL;
}

typedef struct cg_arg {
    const wf__conv_gemm_geom *g;
    const float *x, *bias;
    float *col, *t, *y;
    int cb, cbo; /* the channel block of the input and of the output; 0: that one is plain */
    bool sum, relu;
} cg_arg;

/* nb blocks of cb floats, src's stride apart, one after another into dst (cb a constant at the call
 * that matters, so a block is one vector move) */
__attribute__((always_inline)) static inline void cg_copy_blocks(float *dst, const float *src, int64_t nb, int64_t stride,
                                                                 int64_t cb)
{
    for (int64_t b = 0; b < nb; b++, src += stride, dst += cb)
        for (int64_t e = 0; e < cb; e++) dst[e] = src[e];
}

/* Col rows [q0, q1): output pixel q = (n, oh, ow), its K values tap by tap. A blocked input is copied a
 * channel block at a time (a memcpy call per block cost more than the copy). */
WF__VEC static void cg_im2col(void *arg, int64_t q0, int64_t q1)
{
    const cg_arg *a = arg;
    const wf__conv_gemm_geom *g = a->g;
    const wf__nn_window *wn = &g->win;
    int64_t C = g->c, H = g->h, W = g->w, P = g->oh * g->ow, K = C * g->kh * g->kw, cb = a->cb;
    for (int64_t q = q0; q < q1; q++) {
        int64_t n = q / P, oh = q % P / g->ow, ow = q % g->ow;
        float *row = a->col + q * K;
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++, row += C) {
                int64_t ih = oh * wn->s[0] - wn->pb[0] + i * wn->d[0], iw = ow * wn->s[1] - wn->pb[1] + j * wn->d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                    memset(row, 0, sizeof(float) * (size_t)C);
                } else if (cb) {
                    const float *src = a->x + n * C * H * W + (ih * W + iw) * cb; /* block 0 of image n */
                    if (cb == 8) cg_copy_blocks(row, src, C / 8, H * W * 8, 8);
                    else cg_copy_blocks(row, src, C / cb, H * W * cb, cb);
                } else {
                    const float *src = a->x + n * C * H * W + ih * W + iw;
                    for (int64_t c = 0; c < C; c++) row[c] = src[c * H * W];
                }
            }
    }
}

/* Pixel groups [u0, u1) of CG_GROUP pixels of one image: y from the product t ([N P][O]), the bias (zeros
 * when the node has none), what y holds (sum) and a Relu. A group's rows of t stay in L1 while each
 * channel block (plain: each channel) of y is written; walking y block by block instead read t a column at
 * a time, O floats apart, which cost more than the product's last tenth (ResNet-50's layer 4: 100-300 us a
 * call). */
#define CG_GROUP 4

/* np pixels of one channel block (cb floats each, cb a constant at the calls that matter): y = t + bias
 * (+ y when sum), Relu'd when relu (NaN stays NaN, as on the direct path); t's pixels O floats apart */
__attribute__((always_inline)) static inline void cg_block(float *y, const float *t, const float *bias, int64_t np,
                                                           int64_t cb, int64_t O, bool sum, bool relu)
{
    for (int64_t p = 0; p < np; p++, y += cb, t += O)
        for (int64_t j = 0; j < cb; j++) {
            float v = t[j] + bias[j];
            if (sum) v += y[j];
            y[j] = relu && v < 0 ? 0.0f : v;
        }
}

#define CG_BLOCK(CB)                                                                                               \
    do {                                                                                                           \
        if (a->sum && a->relu) cg_block(y, t, bias, np, CB, O, true, true);                                         \
        else if (a->sum) cg_block(y, t, bias, np, CB, O, true, false);                                              \
        else if (a->relu) cg_block(y, t, bias, np, CB, O, false, true);                                             \
        else cg_block(y, t, bias, np, CB, O, false, false);                                                         \
    } while (0)

WF__VEC static void cg_scatter(void *arg, int64_t u0, int64_t u1)
{
    const cg_arg *a = arg;
    const wf__conv_gemm_geom *g = a->g;
    int64_t O = g->oc, P = g->oh * g->ow, cb = a->cbo, per = (P + CG_GROUP - 1) / CG_GROUP;
    for (int64_t u = u0; u < u1; u++) {
        int64_t n = u / per, p0 = u % per * CG_GROUP, np = p0 + CG_GROUP < P ? CG_GROUP : P - p0;
        if (!cb) { /* plain y: channel o's pixels p0 .. p0 + np - 1 */
            for (int64_t o = 0; o < O; o++) {
                float *y = a->y + (n * O + o) * P + p0;
                const float *t = a->t + (n * P + p0) * O + o;
                for (int64_t p = 0; p < np; p++) {
                    float v = t[p * O] + a->bias[o] + (a->sum ? y[p] : 0.0f);
                    y[p] = a->relu && v < 0 ? 0.0f : v;
                }
            }
            continue;
        }
        for (int64_t b = 0; b < O / cb; b++) {
            float *y = a->y + ((n * (O / cb) + b) * P + p0) * cb;
            const float *t = a->t + (n * P + p0) * O + b * cb, *bias = a->bias + b * cb;
            if (cb == 8) CG_BLOCK(8);
            else if (cb == 16) CG_BLOCK(16);
            else CG_BLOCK(cb);
        }
    }
}

/* No primitive: the entry keeps the packed weights' size (0: oneDNN refuses the shape) and their cache. */
static wf_status *cg_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
{
    (void)k, (void)eng;
    const wf__conv_gemm_geom *g = arg;
    p->gpack = wf__sgemm_w_bytes(g->oc, g->n * g->oh * g->ow, g->c * g->kh * g->kw);
    return NULL;
}

wf_status *wf__conv_gemm(wf__kctx *k, const wf__conv_gemm_geom *g, const float *x, const float *w, uint64_t wver,
                         const float *bias, float *y, bool sum, int act, bool *done)
{
    *done = false;
    int64_t px = g->n * g->oh * g->ow, K = g->c * g->kh * g->kw, O = g->oc;
    int64_t key[8] = {'G', g->n, g->c, g->oc, g->oh, g->ow, g->kh, g->kw};
    wf__dn_prim *p;
    WF__TRY(wf__dn_acquire(k, key, 8, cg_build, (void *)g, &p));
    wf_status *s = NULL;
    wf__dn_run *r = NULL;
    void *wbuf = NULL;
    float *scratch = NULL;
    bool cached = false;
    size_t bytes = p->gpack;
    cg_pack_arg pa = {g, w, p};
    if (!bytes || (s = wf__dn_run_get(k, p, &r))) goto out; /* a shape oneDNN's packing refuses: direct */
    if ((s = wf__dn_weights_with(k, p, r, wver, bytes + WF__ALIGN, cg_pack, &pa, &wbuf, &cached))) goto out;
    if (*(const float *)((const char *)wbuf + bytes) != 0.0f) goto out; /* a weight is not finite */
    /* Col and the product from the calling thread's scratch cache (k_tmp.h), shared by a run's nodes */
    if ((s = wf__dn_alloc_f32(k, px * (K + O) + O, &scratch))) goto out;
    float *zeros = scratch + px * (K + O);
    if (!bias) memset(zeros, 0, sizeof(float) * (size_t)O);
    int cb = wf__dn_channel_block();
    cg_arg a = {g, x, bias ? bias : zeros, scratch, scratch + px * K, y, (k->in_blocked & 1) ? cb : 0,
                (k->out_blocked & 1) ? cb : 0, sum, act == WF__ACT_RELU};
    wf__parallel_for(k, px, 1 + 16384 / (K + 1), cg_im2col, &a);
    int tok = wf__intra_begin(k);
    int st = wf__sgemm_w_compute(O, px, K, wbuf, a.col, a.t);
    wf__intra_end(k, tok);
    if (st) {
        s = wf__kctx_fail(k, WF_INTERNAL, "oneDNN's packed GEMM [%lld x %lld] x [%lld x %lld] failed (status %d)",
                          (long long)O, (long long)K, (long long)K, (long long)px, st);
        goto out;
    }
    int64_t groups = g->n * ((g->oh * g->ow + CG_GROUP - 1) / CG_GROUP);
    wf__parallel_for(k, groups, 1 + 16384 / (CG_GROUP * O), cg_scatter, &a);
    wf__dn_conv_act_after(k, y, g->n * O * g->oh * g->ow, act, k->fused_alpha, k->fused_beta);
    atomic_fetch_add(&g_gemm_runs, 1);
    *done = true;
out:
    wf__dn_tmp_free(scratch);
    if (wbuf) wf__dn_weights_done(p, cached);
    if (r) wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    return s;
}
