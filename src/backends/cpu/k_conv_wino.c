/*
 * Winograd F(4x4, 3x3) and F(2x2, 3x3) for the CPU's 3x3 stride-1 f32 convolutions on level 3's
 * channel-blocked layout (nChw8c / nChw16c), the shape that dominates GoogLeNet, ResNet, SqueezeNet and
 * DenseNet.
 *
 * Each (m + 2)-square input tile d (stride m) becomes V = B^T d B and each 3x3 filter g becomes U = G g G^T
 * (once per weight version, cached as oneDNN's reordered weights are); the (m + 2)^2 positions p of a tile
 * are independent products M_p = V_p U_p (tiles x C times C x K), and a tile's m x m outputs are A^T M A.
 * The products do 36 C K multiply-adds per 16 outputs (F(4x4)) or 16 C K per 4 (F(2x2)) where the direct
 * convolution does 9 C K per output: 4x or 2.25x fewer. On the 2-core Zen 3 (AVX2), where oneDNN 2.6's
 * direct jit:avx2 kernel runs these layers at 180-195 GFLOP/s (83-88% of the FMA peak) and ONNX Runtime's
 * MLAS kernels 3-11% faster, the products run at 175-185 GFLOP/s in oneDNN's sgemm. Neither oneDNN 2.6
 * (Winograd on AVX-512 only) nor ONNX Runtime's MLAS has it on AVX2. Which form, and whether at all: wino_m
 * and wf__wino_takes, with the measurements.
 *
 * Work is split into chunks of tiles, and each thread takes whole chunks through the three steps (input
 * transform, one single-threaded sgemm call per position, output transform) in its own scratch: no
 * barrier between the steps and no traffic between cores.
 *
 * Numerics: the transforms add and subtract (F(4x4)'s with factors up to 8), so the result differs from
 * the direct kernel's by a change of summation order (test_dnnl's test_conv_winograd measures it); an input
 * or a weight that is NaN or infinite, though, would spread through a whole tile (inf - inf), so a
 * convolution with any non-finite input value or weight runs the direct kernel instead (the input is
 * scanned first; the weights once per version). Bias, the fused residual (added to what y holds) and the
 * activation come after the output transform, in the direct path's order.
 */
#include "k_dnnl.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef float wv8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t wi8 __attribute__((vector_size(32), aligned(4)));

static atomic_int_least64_t g_wino_runs, g_wino4_runs;
int64_t wf__wino_runs(int64_t *f4)
{
    *f4 = atomic_load(&g_wino4_runs);
    return atomic_load(&g_wino_runs);
}

/* Tiles a chunk (about): each of a chunk's 16 sgemm calls packs its C x K block of U, which takes as long as
 * the product of a few tiles, so a chunk needs dozens; its V and M (16 x 64 x (C + K) floats, 1-2 MB) then
 * live in L2 and L3. GoogLeNet's 3x3 layers, sum of node minima: 16 tiles 16.9 ms, 32 15.3, 64 14.5-15.3,
 * 128 15.7, 256 15.7 (chunks 48 and 96: 14.7, 14.6). */
#define WINO_CHUNK 64
#define WINO_CHUNK4 32
#define WINO_MIN4 24

/* F(4x4, 3x3) where each thread gets WINO_MIN4 tiles of 6x6 or more, else F(2x2, 3x3) */
static int wino_m(const wf__kctx *k, const wf__wino_geom *g)
{
    int64_t tiles4 = g->n * ((g->oh + 3) / 4) * ((g->ow + 3) / 4);
    return tiles4 / wf__intra_threads(k) >= WINO_MIN4 ? 4 : 2;
}

bool wf__wino_takes(const wf__kctx *k, const wf__wino_geom *g, int64_t groups, int64_t kh, int64_t kw,
                    const wf__nn_window *wn)
{
    /* WEFT_CPU_WINOGRAD=0 turns it off (read once: this runs at every convolution) */
    static atomic_int off = -1;
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) {
        const char *e = getenv("WEFT_CPU_WINOGRAD");
        atomic_store_explicit(&off, o = e && !strcmp(e, "0"), memory_order_relaxed);
    }
    int cb = wf__dn_channel_block(), m = wino_m(k, g);
    int64_t tiles2 = g->n * ((g->oh + 1) / 2) * ((g->ow + 1) / 2);
    int64_t per = g->n * ((g->oh + m - 1) / m) * ((g->ow + m - 1) / m) / wf__intra_threads(k);
    /* What pays, measured layer by layer on GoogLeNet, ResNet-50, SqueezeNet 1.1 and DenseNet-121 (batch 1,
     * 2 threads, Zen 3; against the direct kernel): the products' work C K against the transforms', where
     * an input channel costs about twice an output channel (a 6x6 or 4x4 tile in, a 4x4 or 2x2 block out):
     * w = C K / (2 C + K) must be 12 or more where each thread gets 48 tiles or more; with fewer, whose sgemm
     * calls repack U for little work, 18 for F(4x4) and 24 for F(2x2). F(4x4): GoogLeNet's 64 -> 192 at 56x56
     * (w 38) 1.80x, 96 -> 128 and 128 -> 192 at 28x28 (24 tiles a thread) 1.99x and 2.13x, 32 -> 96 at 28x28
     * (w 19) 1.10x, 16 -> 32 at 28x28 (w 8) 0.87x; DenseNet's 128 -> 32 (w 14) at 56x56 1.35x but at 28x28
     * 0.93-0.97x; SqueezeNet's 32 -> 128 at 27x27 (w 21) 1.47-1.50x, 16 -> 64 at 55x55 (w 11) 1.05x.
     * F(2x2): ResNet-50's 256 -> 256 at 14x14 1.47-1.64x; SqueezeNet's 48 -> 192 at 13x13 (w 32) 1.08-1.19x;
     * GoogLeNet's 32 -> 128 at 14x14 (w 21) 0.91-1.06x, 32 -> 64 (w 16) 0.88x; DenseNet's 128 -> 32 at 14x14
     * 0.90x. Below 32 tiles of 2x2 (7x7 at batch 1) the products run at half speed and U (16/9 of the
     * weights) comes from memory: ResNet-50's 512 -> 512 at 7x7, 0.76-0.78x. */
    int64_t need = per >= 48 ? 12 : m == 4 ? 18 : 24;
    return !o && (k->in_blocked & 1) && (k->out_blocked & 1) && wf__dn_blocked_tag() != dnnl_acdb && cb % 8 == 0 &&
           groups == 1 && kh == 3 && kw == 3 && wn->s[0] == 1 && wn->s[1] == 1 && wn->d[0] == 1 && wn->d[1] == 1 &&
           g->c % cb == 0 && g->oc % cb == 0 && tiles2 >= 32 && g->oh >= 2 && g->ow >= 2 &&
           g->c * g->oc >= need * (2 * g->c + g->oc);
}

/* ---- weights: U[p][c][k] = (G g G^T)[p / a][p % a], a = m + 2 ----
 * F(2x2, 3x3): G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. F(4x4, 3x3): the matrices of Lavin and Gray,
 * "Fast Algorithms for Convolutional Neural Networks" (2015), points 0, 1, -1, 2, -2 and infinity:
 * G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]. */

typedef struct wino_pack_arg {
    const float *w; /* [K][C][3][3], packed into [a*a][C][K] and one float: 1 when a weight is not finite */
    int64_t c, k;
    int m;
} wino_pack_arg;

/* G x for a 3-vector x: a = 4 or 6 values */
static void wino_g(int m, const double *x, double *out)
{
    if (m == 2) {
        out[0] = x[0];
        out[1] = 0.5 * (x[0] + x[1] + x[2]);
        out[2] = 0.5 * (x[0] - x[1] + x[2]);
        out[3] = x[2];
    } else {
        out[0] = x[0] / 4;
        out[1] = -(x[0] + x[1] + x[2]) / 6;
        out[2] = -(x[0] - x[1] + x[2]) / 6;
        out[3] = x[0] / 24 + x[1] / 12 + x[2] / 6;
        out[4] = x[0] / 24 - x[1] / 12 + x[2] / 6;
        out[5] = x[2];
    }
}

static wf_status *wino_pack(wf__kctx *k, void *arg, void *dst)
{
    (void)k;
    const wino_pack_arg *pa = arg;
    float *u = dst;
    int64_t C = pa->c, K = pa->k;
    int al = pa->m + 2;
    bool bad = false;
    for (int64_t o = 0; o < K; o++)
        for (int64_t c = 0; c < C; c++) {
            const float *g = pa->w + (o * C + c) * 9;
            double t[6][3], col[3], r[6];
            for (int j = 0; j < 3; j++) { /* G g: column j */
                bad |= !isfinite(g[j]) || !isfinite(g[3 + j]) || !isfinite(g[6 + j]);
                col[0] = g[j], col[1] = g[3 + j], col[2] = g[6 + j];
                wino_g(pa->m, col, r);
                for (int i = 0; i < al; i++) t[i][j] = r[i];
            }
            for (int i = 0; i < al; i++) { /* (G g) G^T: row i */
                wino_g(pa->m, t[i], r);
                for (int j = 0; j < al; j++) u[((int64_t)(al * i + j) * C + c) * K + o] = (float)r[j];
            }
        }
    u[al * al * C * K] = bad ? 1.0f : 0.0f;
    return NULL;
}

/* ---- the input scan: any non-finite value sends the convolution to the direct kernel ---- */

typedef struct wino_scan_arg {
    const float *x;
    atomic_int bad;
} wino_scan_arg;

WF__VEC static void wino_scan_range(void *arg, int64_t i0, int64_t i1)
{
    wino_scan_arg *a = arg;
    /* x - x is 0 for a finite x and NaN otherwise; NaN != NaN */
    float acc = 0;
    for (int64_t i = i0; i < i1; i++) acc += a->x[i] - a->x[i];
    if (acc != acc) atomic_store_explicit(&a->bad, 1, memory_order_relaxed);
}

/* ---- one chunk of tiles through a thread's scratch ---- */

typedef struct wino_arg {
    const wf__wino_geom *g;
    const float *x, *u, *bias;
    float *y, *scratch; /* scratch: per thread, P * chunk * (C + K) floats */
    int64_t chunk, tiles, th, tw, cb;
    int m, P;                    /* outputs per tile side (2 or 4), positions a tile (16 or 36) */
    int threads;
    bool sum, relu;
    atomic_int failed;
} wino_arg;

/* The 1-D transforms on vectors, in place: B^T (input), then A^T (output, 4 or 6 values into 2 or 4).
 * F(2x2): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]. F(4x4) (Lavin and
 * Gray): B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
 * A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]. */
__attribute__((always_inline)) static inline void wino_bt(int m, wv8 *d)
{
    if (m == 2) {
        wv8 r0 = d[0] - d[2], r1 = d[1] + d[2], r2 = d[2] - d[1], r3 = d[1] - d[3];
        d[0] = r0, d[1] = r1, d[2] = r2, d[3] = r3;
    } else {
        wv8 t1 = d[4] - 4 * d[2], t2 = d[3] - 4 * d[1], t3 = d[4] - d[2], t4 = 2 * (d[3] - d[1]);
        wv8 r0 = 4 * d[0] - 5 * d[2] + d[4], r5 = 4 * d[1] - 5 * d[3] + d[5];
        d[0] = r0, d[1] = t1 + t2, d[2] = t1 - t2, d[3] = t3 + t4, d[4] = t3 - t4, d[5] = r5;
    }
}

__attribute__((always_inline)) static inline void wino_at(int m, const wv8 *q, wv8 *o)
{
    if (m == 2) {
        o[0] = q[0] + q[1] + q[2], o[1] = q[1] - q[2] - q[3];
    } else {
        wv8 a = q[1] + q[2], b = q[1] - q[2], c = q[3] + q[4], d = q[3] - q[4];
        o[0] = q[0] + a + c, o[1] = b + 2 * d, o[2] = a + 4 * c, o[3] = b + 8 * d + q[5];
    }
}

/* V[p][t][c] for tiles t0 .. t0 + nt - 1: the (m + 2)-square window at stride m, zero outside x */
__attribute__((always_inline)) static inline void wino_in_m(const wino_arg *a, const int m, int64_t t0, int64_t nt, float *V)
{
    const wf__wino_geom *g = a->g;
    const int al = m + 2;
    int64_t C = g->c, H = g->h, W = g->w, cb = a->cb, CB = C / cb, per = a->th * a->tw, stride = a->chunk * C;
    const wv8 zero = {0};
    for (int64_t t = 0; t < nt; t++) {
        int64_t tg = t0 + t, n = tg / per, ty = tg % per / a->tw, tx = tg % a->tw;
        int64_t r0 = m * ty - g->pt, c0 = m * tx - g->pl;
        bool inner = r0 >= 0 && c0 >= 0 && r0 + al <= H && c0 + al <= W;
        for (int64_t b = 0; b < CB; b++) {
            const float *xb = a->x + (n * CB + b) * H * W * cb;
            for (int64_t s = 0; s < cb; s += 8) {
                wv8 d[6][6], col[6];
                for (int i = 0; i < al; i++)
                    for (int j = 0; j < al; j++) {
                        int64_t r = r0 + i, c = c0 + j;
                        d[i][j] = inner || (r >= 0 && r < H && c >= 0 && c < W) ? *(const wv8 *)(xb + (r * W + c) * cb + s)
                                                                                : zero;
                    }
                for (int j = 0; j < al; j++) { /* B^T d: columns */
                    for (int i = 0; i < al; i++) col[i] = d[i][j];
                    wino_bt(m, col);
                    for (int i = 0; i < al; i++) d[i][j] = col[i];
                }
                float *v = V + t * C + b * cb + s;
                for (int i = 0; i < al; i++) { /* (B^T d) B: rows */
                    wino_bt(m, d[i]);
                    for (int j = 0; j < al; j++) *(wv8 *)(v + (al * i + j) * stride) = d[i][j];
                }
            }
        }
    }
}

/* y's tiles t0 .. t0 + nt - 1 from M[p][t][k]: A^T M A, + bias, + what y holds (sum), relu */
__attribute__((always_inline)) static inline void wino_out_m(const wino_arg *a, const int m, int64_t t0, int64_t nt,
                                                             const float *M)
{
    const wf__wino_geom *g = a->g;
    const int al = m + 2;
    int64_t K = g->oc, OH = g->oh, OW = g->ow, cb = a->cb, KB = K / cb, per = a->th * a->tw, stride = a->chunk * K;
    const wv8 zero = {0};
    for (int64_t t = 0; t < nt; t++) {
        int64_t tg = t0 + t, n = tg / per, ty = tg % per / a->tw, tx = tg % a->tw;
        int64_t oy = m * ty, ox = m * tx;
        bool full = oy + m <= OH && ox + m <= OW;
        for (int64_t b = 0; b < KB; b++) {
            float *yb = a->y + (n * KB + b) * OH * OW * cb;
            for (int64_t s = 0; s < cb; s += 8) {
                const float *mp = M + t * K + b * cb + s;
                wv8 q[6], r[4][6], o[4][4], c4[4];
                for (int j = 0; j < al; j++) { /* A^T q: columns */
                    for (int i = 0; i < al; i++) q[i] = *(const wv8 *)(mp + (al * i + j) * stride);
                    wino_at(m, q, c4);
                    for (int i = 0; i < m; i++) r[i][j] = c4[i];
                }
                for (int i = 0; i < m; i++) wino_at(m, r[i], o[i]); /* (A^T q) A: rows */
                wv8 bv = a->bias ? *(const wv8 *)(a->bias + b * cb + s) : zero;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < m; j++) {
                        if (!full && (oy + i >= OH || ox + j >= OW)) continue;
                        wv8 *dst = (wv8 *)(yb + ((oy + i) * OW + ox + j) * cb + s);
                        wv8 v = o[i][j] + bv;
                        if (a->sum) v = *dst + v;
                        /* v < 0 ? 0 : v, NaN kept (the compare is false) */
                        if (a->relu) v = (wv8)((wi8)v & ~(wi8)(v < zero));
                        *dst = v;
                    }
            }
        }
    }
}

/* each form compiled with m a constant, so that the tile's vectors can stay in registers */
WF__VEC static void wino_in(const wino_arg *a, int64_t t0, int64_t nt, float *V)
{
    if (a->m == 2) wino_in_m(a, 2, t0, nt, V);
    else wino_in_m(a, 4, t0, nt, V);
}

WF__VEC static void wino_out(const wino_arg *a, int64_t t0, int64_t nt, const float *M)
{
    if (a->m == 2) wino_out_m(a, 2, t0, nt, M);
    else wino_out_m(a, 4, t0, nt, M);
}

static void wino_range(void *arg, int64_t c0, int64_t c1)
{
    wino_arg *a = arg;
    const wf__wino_geom *g = a->g;
    int th = omp_get_thread_num();
    if (th < 0 || th >= a->threads) th = 0;
    /* Run inline (the intra-op gate kept the kernel on its thread, or a team of one): sgemm would open a
     * region of every core; made inactive here, it runs as thread 0 of 1, as inside the team. */
    int levels = omp_in_parallel() ? -1 : omp_get_max_active_levels();
    if (levels >= 0) omp_set_max_active_levels(0);
    int64_t C = g->c, K = g->oc;
    float *V = a->scratch + (size_t)th * a->P * a->chunk * (C + K), *M = V + a->P * a->chunk * C;
    for (int64_t ch = c0; ch < c1; ch++) {
        int64_t t0 = ch * a->chunk, nt = a->tiles - t0 < a->chunk ? a->tiles - t0 : a->chunk;
        wino_in(a, t0, nt, V);
        for (int p = 0; p < a->P; p++)
            if (dnnl_sgemm('N', 'N', nt, K, C, 1.0f, V + p * a->chunk * C, C, a->u + p * C * K, K, 0.0f,
                           M + p * a->chunk * K, K) != dnnl_success)
                atomic_store_explicit(&a->failed, 1, memory_order_relaxed);
        wino_out(a, t0, nt, M);
    }
    if (levels >= 0) omp_set_max_active_levels(levels);
}

/* The node's cache entry holds only the transformed weights (no oneDNN primitive). */
static wf_status *wino_build(wf__kctx *k, void *arg, dnnl_engine_t eng, wf__dn_prim *p)
{
    (void)k, (void)arg, (void)eng, (void)p;
    return NULL;
}

wf_status *wf__wino_conv(wf__kctx *k, const wf__wino_geom *g, const float *x, const float *w, uint64_t wver,
                         const float *bias, float *y, bool sum, int act, double alpha, double beta, bool *done)
{
    *done = false;
    /* the input first: nothing is written before the direct kernel may have to run instead */
    wino_scan_arg sa = {x, 0};
    wf__parallel_for(k, g->n * g->c * g->h * g->w, 65536, wino_scan_range, &sa);
    if (atomic_load(&sa.bad)) return NULL;
    int m = wino_m(k, g), al = m + 2, P = al * al;
    int64_t key[4] = {'W', g->c, g->oc, m};
    wf__dn_prim *p;
    WF__TRY(wf__dn_acquire(k, key, 4, wino_build, NULL, &p));
    wf_status *s = NULL;
    wf__dn_run *r = NULL;
    void *ubuf = NULL, *sbuf = NULL;
    bool cached = false;
    wino_pack_arg pa = {w, g->c, g->oc, m};
    if ((s = wf__dn_run_get(k, p, &r))) goto out;
    size_t ub = (size_t)(P * g->c * g->oc + 1) * sizeof(float);
    if ((s = wf__dn_weights_with(k, p, r, wver, ub, wino_pack, &pa, &ubuf, &cached))) goto out;
    const float *u = ubuf;
    if (u[P * g->c * g->oc] != 0.0f) goto out; /* a weight is not finite: the direct kernel */
    int64_t th = (g->oh + m - 1) / m, tw = (g->ow + m - 1) / m, tiles = g->n * th * tw;
    /* chunks of about WINO_CHUNK tiles, as many for every thread (the team splits them in equal blocks) */
    int threads = wf__intra_threads(k);
    int64_t target = m == 2 ? WINO_CHUNK : WINO_CHUNK4;
    int64_t per = (tiles + (int64_t)threads * target - 1) / ((int64_t)threads * target);
    int64_t nch = per * threads, chunk = (tiles + nch - 1) / nch;
    nch = (tiles + chunk - 1) / chunk;
    /* from the calling thread's scratch cache (k_tmp.h), not the node's state: the convolutions of a run
     * share one buffer instead of each holding its own (ResNet-50: about 20 MB) */
    float *fbuf = NULL;
    if ((s = wf__dn_alloc_f32(k, (int64_t)threads * P * chunk * (g->c + g->oc), &fbuf))) goto out;
    sbuf = fbuf;
    wino_arg a = {.g = g, .x = x, .u = u, .bias = bias, .y = y, .scratch = sbuf, .chunk = chunk, .tiles = tiles,
                  .th = th, .tw = tw, .cb = wf__dn_channel_block(), .m = m, .P = P, .threads = threads, .sum = sum,
                  .relu = act == WF__ACT_RELU};
    atomic_init(&a.failed, 0);
    wf__parallel_for(k, nch, 1, wino_range, &a);
    if (atomic_load(&a.failed)) {
        s = wf__kctx_fail(k, WF_INTERNAL, "oneDNN's sgemm refused the Winograd products (%lld x %lld x %lld)",
                          (long long)chunk, (long long)g->oc, (long long)g->c);
        goto out;
    }
    wf__dn_conv_act_after(k, y, g->n * g->oc * g->oh * g->ow, act, alpha, beta);
    atomic_fetch_add(&g_wino_runs, 1);
    if (m == 4) atomic_fetch_add(&g_wino4_runs, 1);
    *done = true;
out:
    wf__dn_tmp_free(sbuf);
    if (ubuf) wf__dn_weights_done(p, cached);
    if (r) wf__dn_run_put(p, r);
    wf__dn_release(k, p);
    return s;
}
