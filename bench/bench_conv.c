/*
 * f32 Conv2D on ResNet-18-like layers: weft's kernel through the public API against oneDNN called directly
 * in two ways, with plain NCHW activations and with the layout oneDNN prefers plus the reorders of the
 * activations in and out (weights reordered once, as a Const weight cache does). The direct columns are
 * what the layout rule in src/backends/cpu/k_dnnl_conv.c is chosen from; the weft column is end to end.
 *
 * usage: bench_conv [--threads N] [--runs R] [--batch B] [--only NAME]
 */
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

#include "weft/weft.h"

typedef struct conv_case {
    const char *name;
    int64_t c, h, w, oc, k, s, p, g;
} conv_case;

static const conv_case CASES[] = {
    {"stem7x7s2", 3, 224, 224, 64, 7, 2, 3, 1},
    {"c64_56_3x3", 64, 56, 56, 64, 3, 1, 1, 1},
    {"c128_28_3x3", 128, 28, 28, 128, 3, 1, 1, 1},
    {"c256_14_3x3", 256, 14, 14, 256, 3, 1, 1, 1},
    {"c512_7_3x3", 512, 7, 7, 512, 3, 1, 1, 1},
    {"c64_56_3x3s2", 64, 56, 56, 128, 3, 2, 1, 1},
    {"c64_56_1x1s2", 64, 56, 56, 128, 1, 2, 0, 1},
    {"c256_14_1x1s2", 256, 14, 14, 512, 1, 2, 0, 1},
    {"c256_56_1x1", 256, 56, 56, 64, 1, 1, 0, 1},
    {"dw32_112_3x3", 32, 112, 112, 32, 3, 1, 1, 32},
    /* ShuffleNetV2's and MobileNet's 1x1 layers at small spatial sizes */
    {"c58_28_1x1", 58, 28, 28, 58, 1, 1, 0, 1},
    {"c116_14_1x1", 116, 14, 14, 116, 1, 1, 0, 1},
    {"c232_7_1x1", 232, 7, 7, 232, 1, 1, 0, 1},
    {"c464_7_1x1_1024", 464, 7, 7, 1024, 1, 1, 0, 1},
    {"c96_14_1x1_576", 96, 14, 14, 576, 1, 1, 0, 1},
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The fastest run: on a shared machine the minimum is what repeats; the median follows the neighbours' load. */
static double best(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[0];
}

static void fill(float *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = ((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p) { return (in + 2 * p - k) / s + 1; }

static int bench_weft(const conv_case *cc, int64_t n, int threads, int warm, int runs, const float *x, const float *w,
                      const float *b, float *y, double *ms)
{
    int rc = 0;
    wf_status *s = NULL;
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_session *sess = NULL;
    wf_tensor *tx = NULL, *tw = NULL, *tb = NULL;
    double *t = calloc((size_t)runs, sizeof *t);
    int64_t xd[4] = {n, cc->c, cc->h, cc->w}, wd[4] = {cc->oc, cc->c / cc->g, cc->k, cc->k}, bd[1] = {cc->oc};
    int64_t pads[4] = {cc->p, cc->p, cc->p, cc->p}, strides[2] = {cc->s, cc->s};
    wf_context_options co;
    wf_context_options_init(&co);
    co.intra_op_threads = threads;
    wf_output px, cw, cb;
    wf_node *node;
    if ((s = wf_context_new(&co, &ctx)) || (s = wf_graph_new(&g)) ||
        (s = wf_placeholder(g, "x", WF_F32, 4, xd, &px)) ||
        (s = wf_tensor_new(WF_F32, 4, wd, w, &tw)) || (s = wf_const(g, "w", tw, &cw)) ||
        (s = wf_tensor_new(WF_F32, 1, bd, b, &tb)) || (s = wf_const(g, "b", tb, &cb)))
        goto done;
    wf_attr at[3] = {wf_attr_ints("pads", pads, 4), wf_attr_ints("strides", strides, 2),
                     wf_attr_int("group", cc->g)};
    wf_output in[3] = {px, cw, cb};
    if ((s = wf_op(g, "Conv2D", "conv", in, 3, at, 3, &node)) || (s = wf_session_new(ctx, g, NULL, &sess)) ||
        (s = wf_tensor_new(WF_F32, 4, xd, x, &tx)))
        goto done;
    wf_output yo = wf_out(node, 0);
    wf_feed feed = {px, tx};
    for (int i = 0; i < warm + runs; i++) {
        wf_tensor *out = NULL;
        double t0 = now_ms();
        if ((s = wf_session_run(sess, &feed, 1, &yo, 1, &out, NULL))) goto done;
        double t1 = now_ms();
        if (i >= warm) t[i - warm] = t1 - t0;
        if (i == warm + runs - 1) memcpy(y, wf_tensor_data(out), wf_tensor_bytes(out));
        wf_tensor_free(out);
    }
    *ms = best(t, runs);
done:
    if (s) {
        fprintf(stderr, "bench_conv: weft %s: %s\n", cc->name, wf_status_message(s));
        wf_status_free(s);
        rc = 1;
    }
    free(t);
    wf_tensor_free(tx);
    wf_tensor_free(tw);
    wf_tensor_free(tb);
    wf_session_free(sess);
    wf_graph_free(g);
    wf_context_free(ctx);
    return rc;
}

#define DN(what, expr)                                                                              \
    do {                                                                                            \
        dnnl_status_t st_ = (expr);                                                                 \
        if (st_ != dnnl_success) {                                                                  \
            fprintf(stderr, "bench_conv: oneDNN %s failed (status %d)\n", what, (int)st_);          \
            rc = 1;                                                                                 \
            goto done;                                                                              \
        }                                                                                           \
    } while (0)

/* One reorder between two descriptors over given buffers, executed at once. */
static dnnl_status_t reorder_now(dnnl_engine_t eng, dnnl_stream_t st, const dnnl_memory_desc_t *from, void *src,
                                 const dnnl_memory_desc_t *to, void *dst)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    dnnl_memory_t ms = NULL, md = NULL;
    dnnl_status_t r = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL);
    if (r == dnnl_success) r = dnnl_primitive_create(&p, pd);
    if (r == dnnl_success) r = dnnl_memory_create(&ms, from, eng, src);
    if (r == dnnl_success) r = dnnl_memory_create(&md, to, eng, dst);
    if (r == dnnl_success) {
        dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
        r = dnnl_primitive_execute(p, st, 2, a);
        if (r == dnnl_success) r = dnnl_stream_wait(st);
    }
    if (ms) dnnl_memory_destroy(ms);
    if (md) dnnl_memory_destroy(md);
    if (p) dnnl_primitive_destroy(p);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return r;
}

/* blocked == 0: NCHW src/dst; 1: src/dst format any, with the activation reorders timed. */
static int bench_direct(const conv_case *cc, int64_t n, int threads, int blocked, int warm, int runs, const float *x,
                        const float *w, const float *b, float *y, double *ms, char *impl, size_t impl_n)
{
    int rc = 0;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL, rin_pd = NULL, rout_pd = NULL;
    dnnl_primitive_t prim = NULL, rin = NULL, rout = NULL;
    dnnl_memory_t mx = NULL, mw = NULL, mb = NULL, my = NULL, mxp = NULL, myp = NULL;
    void *wbuf = NULL, *xbuf = NULL, *ybuf = NULL;
    double *t = calloc((size_t)runs, sizeof *t);
    int64_t oh = out_size(cc->h, cc->k, cc->s, cc->p), ow = out_size(cc->w, cc->k, cc->s, cc->p);
    dnnl_dims_t sd = {n, cc->c, cc->h, cc->w}, dd = {n, cc->oc, oh, ow}, bd = {cc->oc};
    dnnl_dims_t wd = {cc->g, cc->oc / cc->g, cc->c / cc->g, cc->k, cc->k};
    int wnd = cc->g == 1 ? 4 : 5;
    if (wnd == 4) memmove(wd, wd + 1, 4 * sizeof wd[0]);
    dnnl_dims_t str = {cc->s, cc->s}, dil = {0, 0}, pad = {cc->p, cc->p};
    dnnl_memory_desc_t xmd, ymd, wmd, bmd, xany, yany, wany;
    dnnl_convolution_desc_t cd;
    omp_set_num_threads(threads);
    DN("engine", dnnl_engine_create(&eng, dnnl_cpu, 0));
    DN("stream", dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    DN("md", dnnl_memory_desc_init_by_tag(&xmd, 4, sd, dnnl_f32, dnnl_abcd));
    DN("md", dnnl_memory_desc_init_by_tag(&ymd, 4, dd, dnnl_f32, dnnl_abcd));
    DN("md", dnnl_memory_desc_init_by_tag(&wmd, wnd, wd, dnnl_f32, wnd == 4 ? dnnl_abcd : dnnl_abcde));
    DN("md", dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_a));
    DN("md", dnnl_memory_desc_init_by_tag(&wany, wnd, wd, dnnl_f32, dnnl_format_tag_any));
    DN("md", dnnl_memory_desc_init_by_tag(&xany, 4, sd, dnnl_f32, blocked ? dnnl_format_tag_any : dnnl_abcd));
    DN("md", dnnl_memory_desc_init_by_tag(&yany, 4, dd, dnnl_f32, blocked ? dnnl_format_tag_any : dnnl_abcd));
    DN("conv desc", dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                               &xany, &wany, &bmd, &yany, str, dil, pad, pad));
    DN("conv pd", dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL));
    const char *name = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
    snprintf(impl, impl_n, "%s", name ? name : "?");
    const dnnl_memory_desc_t *xp = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *yp = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *wp = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    bool rx = !dnnl_memory_desc_equal(xp, &xmd), ry = !dnnl_memory_desc_equal(yp, &ymd);
    wbuf = aligned_alloc(64, (dnnl_memory_desc_get_size(wp) + 63) / 64 * 64);
    xbuf = aligned_alloc(64, (dnnl_memory_desc_get_size(xp) + 63) / 64 * 64);
    ybuf = aligned_alloc(64, (dnnl_memory_desc_get_size(yp) + 63) / 64 * 64);
    if (!wbuf || !xbuf || !ybuf) {
        fprintf(stderr, "bench_conv: out of memory\n");
        rc = 1;
        goto done;
    }
    DN("weight reorder", reorder_now(eng, stream, &wmd, (void *)w, wp, wbuf));
    DN("conv", dnnl_primitive_create(&prim, pd));
    if (rx) {
        DN("reorder in", dnnl_reorder_primitive_desc_create(&rin_pd, &xmd, eng, xp, eng, NULL));
        DN("reorder in", dnnl_primitive_create(&rin, rin_pd));
    }
    if (ry) {
        DN("reorder out", dnnl_reorder_primitive_desc_create(&rout_pd, yp, eng, &ymd, eng, NULL));
        DN("reorder out", dnnl_primitive_create(&rout, rout_pd));
    }
    DN("memory", dnnl_memory_create(&mx, &xmd, eng, (void *)x));
    DN("memory", dnnl_memory_create(&my, &ymd, eng, y));
    DN("memory", dnnl_memory_create(&mxp, xp, eng, rx ? xbuf : (void *)x));
    DN("memory", dnnl_memory_create(&myp, yp, eng, ry ? ybuf : y));
    DN("memory", dnnl_memory_create(&mw, wp, eng, wbuf));
    DN("memory", dnnl_memory_create(&mb, &bmd, eng, (void *)b));
    dnnl_exec_arg_t ain[2] = {{DNNL_ARG_FROM, mx}, {DNNL_ARG_TO, mxp}};
    dnnl_exec_arg_t aout[2] = {{DNNL_ARG_FROM, myp}, {DNNL_ARG_TO, my}};
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mxp}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, myp}};
    for (int i = 0; i < warm + runs; i++) {
        double t0 = now_ms();
        if (rx) DN("reorder in", dnnl_primitive_execute(rin, stream, 2, ain));
        DN("execute", dnnl_primitive_execute(prim, stream, 4, args));
        if (ry) DN("reorder out", dnnl_primitive_execute(rout, stream, 2, aout));
        DN("wait", dnnl_stream_wait(stream));
        double t1 = now_ms();
        if (i >= warm) t[i - warm] = t1 - t0;
    }
    *ms = best(t, runs);
done:
    free(t);
    free(wbuf);
    free(xbuf);
    free(ybuf);
    dnnl_memory_t mems[] = {mx, mw, mb, my, mxp, myp};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    if (prim) dnnl_primitive_destroy(prim);
    if (rin) dnnl_primitive_destroy(rin);
    if (rout) dnnl_primitive_destroy(rout);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (rin_pd) dnnl_primitive_desc_destroy(rin_pd);
    if (rout_pd) dnnl_primitive_desc_destroy(rout_pd);
    if (stream) dnnl_stream_destroy(stream);
    if (eng) dnnl_engine_destroy(eng);
    return rc;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - b[i];
        if (d < 0) d = -d;
        if (d > m) m = d;
    }
    return m;
}

int main(int argc, char **argv)
{
    int threads = 2, runs = 10, warm = 2;
    int64_t batches[2] = {1, 16};
    int nb = 2;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batches[0] = atoll(argv[++i]), nb = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--threads N] [--runs R] [--batch B] [--only NAME]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || runs < 1 || batches[0] < 1) {
        fprintf(stderr, "bench_conv: --threads, --runs and --batch must be positive\n");
        return 2;
    }
    printf("f32 Conv2D with bias, %d thread(s), best of %d runs after %d warm-up; GFLOP/s in brackets\n", threads,
           runs, warm);
    printf("%-15s %3s %17s %17s %17s  %-24s %s\n", "case", "N", "plain NCHW", "any+reorders", "weft", "impl plain/any",
           "max|weft-plain|");
    int rc = 0;
    for (int bi = 0; bi < nb && !rc; bi++) {
        for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0] && !rc; ci++) {
            const conv_case *cc = &CASES[ci];
            if (only && strcmp(only, cc->name)) continue;
            int64_t n = batches[bi];
            int64_t oh = out_size(cc->h, cc->k, cc->s, cc->p), ow = out_size(cc->w, cc->k, cc->s, cc->p);
            size_t nx = (size_t)(n * cc->c * cc->h * cc->w), nw = (size_t)(cc->oc * (cc->c / cc->g) * cc->k * cc->k);
            size_t ny = (size_t)(n * cc->oc * oh * ow);
            float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)cc->oc * 4);
            float *y0 = malloc(ny * 4), *y1 = malloc(ny * 4), *y2 = malloc(ny * 4);
            if (!x || !w || !b || !y0 || !y1 || !y2) {
                fprintf(stderr, "bench_conv: out of memory\n");
                rc = 1;
            }
            double flop = 2.0 * (double)ny * (double)(cc->c / cc->g) * (double)(cc->k * cc->k);
            double ms_p = 0, ms_a = 0, ms_w = 0;
            char impl_p[64], impl_a[64];
            if (!rc) {
                fill(x, nx, 1);
                fill(w, nw, 2);
                fill(b, (size_t)cc->oc, 3);
                rc = bench_direct(cc, n, threads, 0, warm, runs, x, w, b, y0, &ms_p, impl_p, sizeof impl_p);
            }
            if (!rc) rc = bench_direct(cc, n, threads, 1, warm, runs, x, w, b, y1, &ms_a, impl_a, sizeof impl_a);
            if (!rc) rc = bench_weft(cc, n, threads, warm, runs, x, w, b, y2, &ms_w);
            if (!rc) {
                char c0[32], c1[32], c2[32];
                snprintf(c0, sizeof c0, "%.3f [%.0f]", ms_p, flop / (ms_p * 1e6));
                snprintf(c1, sizeof c1, "%.3f [%.0f]", ms_a, flop / (ms_a * 1e6));
                snprintf(c2, sizeof c2, "%.3f [%.0f]", ms_w, flop / (ms_w * 1e6));
                char im[140];
                snprintf(im, sizeof im, "%s/%s", impl_p, impl_a);
                printf("%-15s %3lld %17s %17s %17s  %-24s %.2g (any: %.2g)\n", cc->name, (long long)n, c0, c1, c2,
                       im, max_diff(y2, y0, ny), max_diff(y1, y0, ny));
                fflush(stdout);
            }
            free(x);
            free(w);
            free(b);
            free(y0);
            free(y1);
            free(y2);
        }
    }
    return rc;
}
