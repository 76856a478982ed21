/*
 * Training core: initializers (statistics, bounds, the documented generator, determinism, dtypes, bad
 * specs), losses (values against log-sum-exp and friends computed here in double, extreme logits,
 * gradients by finite differences, bad labels at run time, bad shapes at build time) and optimizers
 * (every kind, schedule and clipping checked after every step against the Keras update computed here
 * in double; state checkpointed and resumed bit for bit; bad options and untrainable variables).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "gradcheck.h"

static wf_context *ctx;

static wf_tensor *tens(wf_dtype dt, int rank, const int64_t *dims, const double *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(dt, rank, dims, NULL, &t));
    for (int64_t i = 0; t && v && i < wf_tensor_size(t); i++) {
        void *d = wf_tensor_data(t);
        switch (dt) {
        case WF_F64: ((double *)d)[i] = v[i]; break;
        case WF_F32: ((float *)d)[i] = (float)v[i]; break;
        case WF_I64: ((int64_t *)d)[i] = (int64_t)v[i]; break;
        case WF_I32: ((int32_t *)d)[i] = (int32_t)v[i]; break;
        default: break;
        }
    }
    return t;
}

static double at(const wf_tensor *t, int64_t i)
{
    const void *d = wf_tensor_data(t);
    switch (wf_tensor_dtype(t)) {
    case WF_F64: return ((const double *)d)[i];
    case WF_F32: return ((const float *)d)[i];
    case WF_F16: return wf_f16_to_f32(((const uint16_t *)d)[i]);
    case WF_BF16: return wf_bf16_to_f32(((const uint16_t *)d)[i]);
    case WF_I64: return (double)((const int64_t *)d)[i];
    case WF_I32: return ((const int32_t *)d)[i];
    default: return NAN;
    }
}

/* ================================================================================================ */
/* Initializers                                                                                      */
/* ================================================================================================ */

static wf_tensor *init(wf_init spec, wf_dtype dt, int rank, const int64_t *dims)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_init_tensor(&spec, dt, rank, dims, &t));
    return t;
}

static void moments(const wf_tensor *t, double *mean, double *var, double *lo, double *hi)
{
    int64_t n = wf_tensor_size(t);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = at(t, i);
        s += v;
        *lo = fmin(*lo, v);
        *hi = fmax(*hi, v);
    }
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (at(t, i) - *mean) * (at(t, i) - *mean);
    *var = s2 / (double)(n - 1);
}

/* mean within 5 standard errors, variance within 3%, values in [lo, hi] */
static void check_stats(const char *what, wf_tensor *t, double mean, double var, double lo, double hi)
{
    if (!t) return;
    double m, v, mn, mx;
    moments(t, &m, &v, &mn, &mx);
    double se = sqrt(var / (double)wf_tensor_size(t));
    if (!(fabs(m - mean) <= 5 * se)) CHECK_FAIL_("%s: mean %.6g, expected %.6g (se %.3g)", what, m, mean, se);
    if (!(fabs(v - var) <= 0.03 * var)) CHECK_FAIL_("%s: variance %.6g, expected %.6g", what, v, var);
    if (!(mn >= lo && mx <= hi)) CHECK_FAIL_("%s: values in [%.6g, %.6g], expected within [%.6g, %.6g]", what, mn, mx, lo, hi);
}

#define TRUNC_VAR 0.77374 /* variance of a unit normal truncated to [-2, 2] */
#define TRUNC_SD 0.87962566103423978

static void test_init_statistics(void)
{
    int64_t big[1] = {200000};
    wf_tensor *t;
    t = init((wf_init){.kind = WF_INIT_UNIFORM, .minval = -2, .maxval = 3, .seed = 1}, WF_F64, 1, big);
    check_stats("uniform(-2, 3)", t, 0.5, 25.0 / 12, -2, 3);
    wf_tensor_free(t);
    t = init((wf_init){.kind = WF_INIT_NORMAL, .mean = 1, .stddev = 2, .seed = 2}, WF_F64, 1, big);
    check_stats("normal(1, 2)", t, 1, 4, -INFINITY, INFINITY);
    /* a normal has values beyond 2 stddev (4.6% of them) */
    {
        int64_t beyond = 0;
        for (int64_t i = 0; t && i < big[0]; i++) beyond += fabs(at(t, i) - 1) > 4;
        CHECK(beyond > big[0] * 0.04 && beyond < big[0] * 0.052);
    }
    wf_tensor_free(t);
    t = init((wf_init){.kind = WF_INIT_TRUNCATED_NORMAL, .mean = 0.5, .stddev = 1.5, .seed = 3}, WF_F64, 1, big);
    check_stats("truncated_normal(0.5, 1.5)", t, 0.5, TRUNC_VAR * 2.25, 0.5 - 3, 0.5 + 3);
    wf_tensor_free(t);
    /* dense [in, out] = [300, 200]: fan_in 300, fan_out 200 */
    int64_t dense[2] = {300, 200};
    double lim = sqrt(6.0 / 500);
    t = init((wf_init){.kind = WF_INIT_GLOROT_UNIFORM, .seed = 4}, WF_F64, 2, dense);
    check_stats("glorot_uniform [300,200]", t, 0, 2.0 / 500, -lim, lim);
    wf_tensor_free(t);
    double sd = sqrt(2.0 / 500) / TRUNC_SD;
    t = init((wf_init){.kind = WF_INIT_GLOROT_NORMAL, .seed = 5}, WF_F64, 2, dense);
    check_stats("glorot_normal [300,200]", t, 0, 2.0 / 500, -2 * sd, 2 * sd);
    wf_tensor_free(t);
    t = init((wf_init){.kind = WF_INIT_HE_UNIFORM, .seed = 6}, WF_F64, 2, dense);
    check_stats("he_uniform [300,200]", t, 0, 2.0 / 300, -sqrt(6.0 / 300), sqrt(6.0 / 300));
    wf_tensor_free(t);
    /* a conv filter OIHW [64, 32, 3, 3]: fan_in 32*9 = 288, fan_out 64*9 = 576 */
    int64_t conv[4] = {64, 32, 3, 3};
    sd = sqrt(2.0 / 288) / TRUNC_SD;
    t = init((wf_init){.kind = WF_INIT_HE_NORMAL, .seed = 7}, WF_F64, 4, conv);
    check_stats("he_normal OIHW [64,32,3,3]", t, 0, 2.0 / 288, -2 * sd, 2 * sd);
    wf_tensor_free(t);
    lim = sqrt(6.0 / (288 + 576));
    t = init((wf_init){.kind = WF_INIT_GLOROT_UNIFORM, .seed = 8}, WF_F64, 4, conv);
    check_stats("glorot_uniform OIHW [64,32,3,3]", t, 0, 2.0 / (288 + 576), -lim, lim);
    wf_tensor_free(t);
    /* constants, on integer dtypes too */
    int64_t d3[1] = {3};
    t = init((wf_init){.kind = WF_INIT_CONSTANT, .value = 7}, WF_I32, 1, d3);
    if (t) CHECK(at(t, 0) == 7 && at(t, 2) == 7);
    wf_tensor_free(t);
    t = init((wf_init){.kind = WF_INIT_ONES}, WF_BF16, 1, d3);
    if (t) CHECK(at(t, 1) == 1);
    wf_tensor_free(t);
    t = init((wf_init){.kind = WF_INIT_ZEROS}, WF_I64, 0, NULL);
    if (t) CHECK(wf_tensor_rank(t) == 0 && at(t, 0) == 0);
    wf_tensor_free(t);
}

/* The documented generator, written out here: splitmix64 started at splitmix64(seed), 53-bit uniforms. */
static uint64_t sm64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void test_init_determinism(void)
{
    int64_t d[2] = {17, 9};
    static const wf_init_kind kinds[] = {WF_INIT_UNIFORM, WF_INIT_NORMAL, WF_INIT_TRUNCATED_NORMAL,
                                         WF_INIT_GLOROT_UNIFORM, WF_INIT_GLOROT_NORMAL, WF_INIT_HE_UNIFORM,
                                         WF_INIT_HE_NORMAL};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        wf_init spec = {.kind = kinds[k], .minval = -1, .maxval = 1, .stddev = 1, .seed = 42};
        wf_tensor *a = init(spec, WF_F64, 2, d), *b = init(spec, WF_F64, 2, d);
        spec.seed = 43;
        wf_tensor *c = init(spec, WF_F64, 2, d);
        if (a && b && c) {
            CHECK(memcmp(wf_tensor_data(a), wf_tensor_data(b), wf_tensor_bytes(a)) == 0);
            int same = 0;
            for (int64_t i = 0; i < wf_tensor_size(a); i++) same += at(a, i) == at(c, i);
            if (same) CHECK_FAIL_("kind %d: seeds 42 and 43 share %d values", (int)kinds[k], same);
            /* every narrower dtype is the f64 value rounded */
            wf_tensor *f = init((wf_init){.kind = kinds[k], .minval = -1, .maxval = 1, .stddev = 1, .seed = 42},
                                WF_F32, 2, d);
            wf_tensor *h = init((wf_init){.kind = kinds[k], .minval = -1, .maxval = 1, .stddev = 1, .seed = 42},
                                WF_F16, 2, d);
            wf_tensor *bf = init((wf_init){.kind = kinds[k], .minval = -1, .maxval = 1, .stddev = 1, .seed = 42},
                                 WF_BF16, 2, d);
            for (int64_t i = 0; f && h && bf && i < wf_tensor_size(a); i++) {
                float x = (float)at(a, i);
                if (at(f, i) != x || at(h, i) != wf_f16_to_f32(wf_f32_to_f16(x)) ||
                    at(bf, i) != wf_bf16_to_f32(wf_f32_to_bf16(x))) {
                    CHECK_FAIL_("kind %d element %lld: f32 %g f16 %g bf16 %g from f64 %.17g", (int)kinds[k],
                                (long long)i, at(f, i), at(h, i), at(bf, i), at(a, i));
                    break;
                }
            }
            wf_tensor_free(f);
            wf_tensor_free(h);
            wf_tensor_free(bf);
        }
        wf_tensor_free(a);
        wf_tensor_free(b);
        wf_tensor_free(c);
    }
    /* the stream itself: uniform(-1, 1) with seed 2024 */
    int64_t n[1] = {6};
    wf_tensor *u = init((wf_init){.kind = WF_INIT_UNIFORM, .minval = -1, .maxval = 1, .seed = 2024}, WF_F64, 1, n);
    uint64_t st = 2024;
    st = sm64(&st);
    for (int i = 0; u && i < 6; i++) {
        double want = -1 + 2 * ((double)(sm64(&st) >> 11) * 0x1.0p-53);
        CHECK(at(u, i) == want);
    }
    wf_tensor_free(u);
}

static void test_init_errors(void)
{
    int64_t d[2] = {3, 4}, neg[1] = {-2}, empty[2] = {0, 5};
    wf_tensor *t = NULL;
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = 0}, WF_F32, 2, d, &t), WF_INVALID_ARGUMENT, "kind 0 is not");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = 99}, WF_F32, 2, d, &t), WF_INVALID_ARGUMENT, "kind 99 is not");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_UNIFORM, .minval = 2, .maxval = 1}, WF_F32, 2, d, &t),
              WF_INVALID_ARGUMENT, "minval 2 and maxval 1");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_UNIFORM, .minval = 0, .maxval = INFINITY}, WF_F32, 2, d, &t),
              WF_INVALID_ARGUMENT, "must be finite");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_NORMAL, .stddev = -1}, WF_F32, 2, d, &t), WF_INVALID_ARGUMENT,
              "stddev -1");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_TRUNCATED_NORMAL, .mean = NAN, .stddev = 1}, WF_F32, 2, d, &t),
              WF_INVALID_ARGUMENT, "truncated_normal");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_HE_NORMAL}, WF_I32, 2, d, &t), WF_INVALID_ARGUMENT,
              "f32, f64, f16 or bf16, not i32");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_ZEROS}, WF_F32, 1, neg, &t), WF_INVALID_ARGUMENT,
              "dim 0 is -2");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_HE_UNIFORM}, WF_F32, 2, empty, &t), WF_INVALID_ARGUMENT,
              "fan_in 0");
    CHECK_ERR(wf_init_tensor(&(wf_init){.kind = WF_INIT_ZEROS}, WF_F32, 9, d, &t), WF_INVALID_ARGUMENT, "rank 9");
    CHECK_ERR(wf_init_tensor(NULL, WF_F32, 2, d, &t), WF_INVALID_ARGUMENT, "NULL");
    CHECK(t == NULL);
}

/* ================================================================================================ */
/* Losses                                                                                            */
/* ================================================================================================ */

enum { LN = 4, LC = 5 };
static const double LOGITS[LN * LC] = {1.0, -0.5, 2.0, 0.3, -1.2, 0.1,  0.2, 0.3, 0.4,  0.5,
                                       -3., 2.5,  0.0, 1.0, -0.7, 0.05, 4.0, -2., -0.1, 1.5};
static const double LABELS[LN] = {2, 0, 1, 4};

/* Runs `out` of g with the feeds and returns element 0 as double (NAN on failure). */
static double run1(wf_graph *g, wf_output out, const wf_feed *f, int nf)
{
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *r = NULL;
    double v = NAN;
    if (s) CHECK_OK(wf_session_run(s, f, nf, &out, 1, &r, NULL));
    if (r) v = at(r, 0);
    wf_tensor_free(r);
    wf_session_free(s);
    return v;
}

static double ref_lse(const double *x, int n)
{
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) m = fmax(m, x[i]);
    for (int i = 0; i < n; i++) s += exp(x[i] - m);
    return m + log(s);
}

static void test_loss_values(void)
{
    for (int dti = 0; dti < 2; dti++) {
        wf_dtype dt = dti ? WF_F32 : WF_F64;
        double tol = dti ? 2e-6 : 1e-13;
        int64_t dl[2] = {LN, LC}, dn[1] = {LN};
        double soft[LN * LC], want_sparse = 0, want_soft = 0;
        for (int n = 0; n < LN; n++) {
            double lse = ref_lse(LOGITS + n * LC, LC), rs = 0;
            want_sparse += (lse - LOGITS[n * LC + (int)LABELS[n]]) / LN;
            for (int c = 0; c < LC; c++) rs += soft[n * LC + c] = 1.0 + ((n * 3 + c * 7) % 5);
            for (int c = 0; c < LC; c++) {
                soft[n * LC + c] /= rs;
                want_soft += soft[n * LC + c] * (lse - LOGITS[n * LC + c]) / LN;
            }
        }
        wf_graph *g;
        CHECK_OK(wf_graph_new(&g));
        wf_output x, y, ys, l1, l2;
        CHECK_OK(wf_placeholder(g, "x", dt, 2, dl, &x));
        CHECK_OK(wf_placeholder(g, "y", WF_I64, 1, dn, &y));
        CHECK_OK(wf_placeholder(g, "ys", dt, 2, dl, &ys));
        CHECK_OK(wf_loss_softmax_cross_entropy(g, "sparse", x, y, 1, &l1));
        CHECK_OK(wf_loss_softmax_cross_entropy(g, "soft", x, ys, 0, &l2));
        CHECK(!strcmp(wf_node_name(l1.node), "sparse") && !strcmp(wf_node_name(l2.node), "soft"));
        wf_tensor *xt = tens(dt, 2, dl, LOGITS), *yt = tens(WF_I64, 1, dn, LABELS), *st = tens(dt, 2, dl, soft);
        wf_feed f[3] = {{x, xt}, {y, yt}, {ys, st}};
        CHECK_NEAR(run1(g, l1, f, 2), want_sparse, tol);
        wf_feed f2[2] = {{x, xt}, {ys, st}};
        CHECK_NEAR(run1(g, l2, f2, 2), want_soft, tol);
        (void)f;
        /* BCE and MSE over [4, 5] */
        double z[LN * LC], p[LN * LC], want_bl = 0, want_bp = 0, want_mse = 0;
        for (int i = 0; i < LN * LC; i++) {
            z[i] = (i * 5 % 7) / 6.0;
            p[i] = 1 / (1 + exp(-LOGITS[i]));
            double xv = LOGITS[i];
            want_bl += (fmax(xv, 0) - xv * z[i] + log1p(exp(-fabs(xv)))) / (LN * LC);
            want_bp += -(z[i] * log(p[i]) + (1 - z[i]) * log(1 - p[i])) / (LN * LC);
            want_mse += (xv - z[i]) * (xv - z[i]) / (LN * LC);
        }
        wf_output zp, pp, lbl, lbp, lm;
        CHECK_OK(wf_placeholder(g, "z", dt, 2, dl, &zp));
        CHECK_OK(wf_placeholder(g, "p", dt, 2, dl, &pp));
        CHECK_OK(wf_loss_binary_cross_entropy(g, "bce_logits", x, zp, 1, &lbl));
        CHECK_OK(wf_loss_binary_cross_entropy(g, "bce_probs", pp, zp, 0, &lbp));
        CHECK_OK(wf_loss_mse(g, "mse", x, zp, &lm));
        wf_tensor *zt = tens(dt, 2, dl, z), *pt = tens(dt, 2, dl, p);
        wf_feed f3[3] = {{x, xt}, {zp, zt}, {pp, pt}};
        CHECK_NEAR(run1(g, lbl, f3, 2), want_bl, tol);
        wf_feed f4[2] = {{pp, pt}, {zp, zt}};
        CHECK_NEAR(run1(g, lbp, f4, 2), want_bp, tol * 4);
        CHECK_NEAR(run1(g, lm, f3, 2), want_mse, tol);
        (void)f3;
        wf_tensor_free(xt);
        wf_tensor_free(yt);
        wf_tensor_free(st);
        wf_tensor_free(zt);
        wf_tensor_free(pt);
        wf_graph_free(g);
    }
}

/* logits of +-1e4 in f32: every loss and gradient finite and right */
static void test_loss_extremes(void)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t dl[2] = {2, 3}, dn[1] = {2};
    const double X[6] = {1e4, -1e4, 0, -1e4, 1e4, 1e4};
    const double Y[2] = {0, 0}; /* row 0: the winner by 1e4 (loss 0); row 1: 2e4 below the two winners */
    const double OH[6] = {1, 0, 0, 1, 0, 0};
    const double Z[6] = {0, 1, 1, 1, 0, 1}; /* BCE: 1e4 vs 0, -1e4 vs 1: each 1e4; 0 vs 1: log 2 */
    wf_output x, y, oh, z, ls, lo, lb, lp, d[4];
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, dl, &x));
    CHECK_OK(wf_placeholder(g, "y", WF_I32, 1, dn, &y));
    CHECK_OK(wf_placeholder(g, "oh", WF_F32, 2, dl, &oh));
    CHECK_OK(wf_placeholder(g, "z", WF_F32, 2, dl, &z));
    CHECK_OK(wf_loss_softmax_cross_entropy(g, "sparse", x, y, 1, &ls));
    CHECK_OK(wf_loss_softmax_cross_entropy(g, "onehot", x, oh, 0, &lo));
    CHECK_OK(wf_loss_binary_cross_entropy(g, "bce", x, z, 1, &lb));
    wf_output xp;
    CHECK_OK(wf_placeholder(g, "probs", WF_F32, 2, dl, &xp));
    CHECK_OK(wf_loss_binary_cross_entropy(g, "bcep", xp, z, 0, &lp));
    wf_output losses[4] = {ls, lo, lb, lp};
    for (int i = 0; i < 4; i++) CHECK_OK(wf_gradients(g, &losses[i], 1, NULL, i == 3 ? &xp : &x, 1, &d[i]));
    wf_tensor *xt = tens(WF_F32, 2, dl, X), *yt = tens(WF_I32, 1, dn, Y), *oht = tens(WF_F32, 2, dl, OH),
              *zt = tens(WF_F32, 2, dl, Z), *pt = tens(WF_F32, 2, dl, (const double[]){0, 1, 0.5, 1, 0, 1});
    wf_feed f[5] = {{x, xt}, {y, yt}, {oh, oht}, {z, zt}, {xp, pt}};
    wf_session *s;
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_output fetch[8] = {ls, lo, lb, lp, d[0], d[1], d[2], d[3]};
    wf_tensor *r[8] = {0};
    CHECK_OK(wf_session_run(s, f, 5, fetch, 8, r, NULL));
    if (r[0]) {
        /* row 1: log-sum-exp(-1e4, 1e4, 1e4) - (-1e4) = 2e4 + log 2 */
        CHECK_NEAR(at(r[0], 0), (2e4 + log(2)) / 2, 1e-2);
        CHECK_NEAR(at(r[1], 0), (2e4 + log(2)) / 2, 1e-2);
        CHECK_NEAR(at(r[2], 0), (4e4 + log(2)) / 6, 1e-2);
        /* probabilities 0 and 1 against the wrong target: clipped to 1e-7, -log(1e-7) each */
        CHECK(isfinite(at(r[3], 0)) && at(r[3], 0) > 0);
        for (int k = 4; k < 8; k++)
            for (int64_t i = 0; i < 6; i++) CHECK(isfinite(at(r[k], i)));
        /* d sparse/dx row 1 = (softmax - onehot) / 2 = (0, 0.5, 0.5) - (0.5, 0, 0) */
        CHECK_NEAR(at(r[4], 3), -0.5, 1e-6);
        CHECK_NEAR(at(r[4], 4), 0.25, 1e-6);
        CHECK_NEAR(at(r[5], 3), -0.5, 1e-6);
        /* d bce/dx = (sigmoid(x) - z) / 6: x = 0, z = 1 -> -1/12 */
        CHECK_NEAR(at(r[6], 2), -0.5 / 6, 1e-6);
        CHECK_NEAR(at(r[6], 0), 1.0 / 6, 1e-6);
    }
    for (int k = 0; k < 8; k++) wf_tensor_free(r[k]);
    wf_session_free(s);
    wf_tensor_free(xt);
    wf_tensor_free(yt);
    wf_tensor_free(oht);
    wf_tensor_free(zt);
    wf_tensor_free(pt);
    wf_graph_free(g);
}

static wf_status *b_sparse(wf_graph *g, const wf_output *in, int n, void *arg, wf_output *out)
{
    return wf_loss_softmax_cross_entropy(g, "loss", in[0], in[1], 1, out);
}
static wf_status *b_soft(wf_graph *g, const wf_output *in, int n, void *arg, wf_output *out)
{
    return wf_loss_softmax_cross_entropy(g, "loss", in[0], in[1], 0, out);
}
static wf_status *b_bce(wf_graph *g, const wf_output *in, int n, void *arg, wf_output *out)
{
    return wf_loss_binary_cross_entropy(g, "loss", in[0], in[1], arg != NULL, out);
}
static wf_status *b_mse(wf_graph *g, const wf_output *in, int n, void *arg, wf_output *out)
{
    return wf_loss_mse(g, "loss", in[0], in[1], out);
}
/* the class loss ops' own gradients: reductions none, sum and mean, the log-probabilities output
 * ("logprob"), NegativeLogLikelihoodLoss ("nll") */
static wf_status *b_sce_op(wf_graph *g, const wf_output *in, int n, void *arg, wf_output *out)
{
    const char *mode = arg;
    bool lp = !strcmp(mode, "logprob"), nll = !strcmp(mode, "nll");
    wf_attr red = wf_attr_string("reduction", lp || nll ? "mean" : mode);
    wf_node *nd = NULL;
    wf_status *s = wf_op(g, nll ? "NegativeLogLikelihoodLoss" : "SoftmaxCrossEntropyLoss", "sce", in, 2, &red, 1, &nd);
    if (!s) *out = wf_out(nd, lp ? 1 : 0);
    return s;
}

static void test_loss_gradients(void)
{
    int64_t dl[2] = {LN, LC}, dn[1] = {LN};
    double soft[LN * LC], z[LN * LC], p[LN * LC], xl[LN * LC];
    for (int i = 0; i < LN * LC; i++) {
        soft[i] = 0.2 + 0.1 * (i % 3);
        z[i] = (i * 5 % 7) / 6.0;
        p[i] = 0.05 + 0.9 * (i * 3 % 11) / 10.0;
        xl[i] = LOGITS[i];
    }
    xl[3] = 0; /* BCE from logits at exactly 0: TensorFlow's form has the right gradient there */
    wf_tensor *x = tens(WF_F64, 2, dl, LOGITS), *y = tens(WF_I64, 1, dn, LABELS), *st = tens(WF_F64, 2, dl, soft),
              *zt = tens(WF_F64, 2, dl, z), *pt = tens(WF_F64, 2, dl, p), *xlt = tens(WF_F64, 2, dl, xl);
    gc_opts o = {.ctx = ctx};
    wf_tensor *in1[2] = {x, y}, *in2[2] = {x, st}, *in3[2] = {xlt, zt}, *in4[2] = {pt, zt}, *in5[2] = {x, zt};
    CHECK_INT(gradcheck("sparse softmax cross-entropy", b_sparse, NULL, 2, in1, &o), 0);
    CHECK_INT(gradcheck("soft softmax cross-entropy", b_soft, NULL, 2, in2, &o), 0);
    CHECK_INT(gradcheck("bce from logits", b_bce, (void *)1, 2, in3, &o), 0);
    CHECK_INT(gradcheck("bce from probabilities", b_bce, NULL, 2, in4, &o), 0);
    CHECK_INT(gradcheck("mse", b_mse, NULL, 2, in5, &o), 0);
    CHECK_INT(gradcheck("SoftmaxCrossEntropyLoss none", b_sce_op, "none", 2, in1, &o), 0);
    CHECK_INT(gradcheck("SoftmaxCrossEntropyLoss sum", b_sce_op, "sum", 2, in1, &o), 0);
    CHECK_INT(gradcheck("SoftmaxCrossEntropyLoss log_prob output", b_sce_op, "logprob", 2, in1, &o), 0);
    CHECK_INT(gradcheck("NegativeLogLikelihoodLoss", b_sce_op, "nll", 2, in1, &o), 0);
    {
        /* [N, C, D] = [2, 3, 2] with targets [2, 2] */
        int64_t d3[3] = {2, 3, 2}, d2[2] = {2, 2};
        wf_tensor *x3 = tens(WF_F64, 3, d3, LOGITS), *t3 = tens(WF_I64, 2, d2, (const double[]){0, 2, 1, 1});
        wf_tensor *in6[2] = {x3, t3};
        CHECK_INT(gradcheck("SoftmaxCrossEntropyLoss [2,3,2] mean", b_sce_op, "mean", 2, in6, &o), 0);
        CHECK_INT(gradcheck("SoftmaxCrossEntropyLoss [2,3,2] none", b_sce_op, "none", 2, in6, &o), 0);
        wf_tensor_free(x3);
        wf_tensor_free(t3);
    }
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_tensor_free(st);
    wf_tensor_free(zt);
    wf_tensor_free(pt);
    wf_tensor_free(xlt);
}

static void test_loss_errors(void)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t dl[2] = {LN, LC}, dn[1] = {LN}, d5[1] = {5}, d42[2] = {4, 2};
    wf_output x, y, bad_y, ys42, l, out;
    CHECK_OK(wf_placeholder(g, "logits", WF_F32, 2, dl, &x));
    CHECK_OK(wf_placeholder(g, "labels", WF_I64, 1, dn, &y));
    CHECK_OK(wf_placeholder(g, "labels5", WF_I64, 1, d5, &bad_y));
    CHECK_OK(wf_placeholder(g, "probs42", WF_F32, 2, d42, &ys42));
    int n0 = wf_graph_num_nodes(g);
    CHECK_ERR(wf_loss_softmax_cross_entropy(g, "xent", x, bad_y, 1, &out), WF_INVALID_ARGUMENT,
              "sparse labels 'labels5' i64[5] do not match logits 'logits' f32[4,5]");
    CHECK_ERR(wf_loss_softmax_cross_entropy(g, "xent", x, ys42, 0, &out), WF_INVALID_ARGUMENT,
              "labels 'probs42' f32[4,2] do not match logits 'logits' f32[4,5]");
    CHECK_ERR(wf_loss_mse(g, "mse", x, ys42, &out), WF_INVALID_ARGUMENT,
              "targets 'probs42' f32[4,2] do not match predictions 'logits' f32[4,5]");
    CHECK_ERR(wf_loss_binary_cross_entropy(g, "bce", ys42, y, 1, &out), WF_INVALID_ARGUMENT, "i64[4]");
    CHECK_ERR(wf_loss_softmax_cross_entropy(g, "xent", y, y, 1, &out), WF_INVALID_ARGUMENT, "must be [N, C]");
    CHECK_INT(wf_graph_num_nodes(g), n0);
    /* a label out of range is a run-time error naming the node and the label; the session goes on */
    CHECK_OK(wf_loss_softmax_cross_entropy(g, "xent", x, y, 1, &l));
    wf_output dx;
    CHECK_OK(wf_gradients(g, &l, 1, NULL, &x, 1, &dx));
    wf_session *s;
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *xt = tens(WF_F32, 2, dl, LOGITS);
    const double bad_labels[2][LN] = {{0, 1, 5, 2}, {0, -1, 2, 3}};
    const char *want[2] = {"target 5 at position 2", "target -1 at position 1"};
    for (int k = 0; k < 2; k++) {
        wf_tensor *yt = tens(WF_I64, 1, dn, bad_labels[k]), *r = NULL;
        wf_feed f[2] = {{x, xt}, {y, yt}};
        wf_status *st = wf_session_run(s, f, 2, k ? &dx : &l, 1, &r, NULL);
        CHECK(st != NULL && r == NULL);
        if (st) {
            CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
            CHECK_STR_CONTAINS(wf_status_message(st), "'xent'");
            CHECK_STR_CONTAINS(wf_status_message(st), want[k]);
            if (!k) fprintf(stderr, "     (message: %s)\n", wf_status_message(st));
        }
        wf_status_free(st);
        wf_tensor_free(yt);
    }
    wf_tensor *yt = tens(WF_I64, 1, dn, LABELS), *r = NULL;
    wf_feed f[2] = {{x, xt}, {y, yt}};
    CHECK_OK(wf_session_run(s, f, 2, &l, 1, &r, NULL));
    if (r) CHECK(isfinite(at(r, 0)) && at(r, 0) > 0);
    wf_tensor_free(r);
    wf_tensor_free(yt);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* ================================================================================================ */
/* Optimizers                                                                                        */
/* ================================================================================================ */

/* y = x @ W + b, loss = mse(y, t) over [N, M] */
enum { N = 4, K = 3, M = 2, NW = K * M };
static const double X[N * K] = {1, 2, 0.5, -1, 0.5, 2, 0.3, -2, 1, 2, 1, -1};
static const double TG[N * M] = {1, -2, 0.5, 3, -1, 0, 2, 1};

typedef struct net {
    wf_graph *g;
    wf_output x, t, W, b, loss, *targets;
    int n_targets;
    wf_tensor *xt, *tt;
} net;

static wf_status *build_net(net *m, wf_dtype dt, const wf_optimizer_options *o)
{
    memset(m, 0, sizeof *m);
    CHECK_OK(wf_graph_new(&m->g));
    int64_t xd[2] = {N, K}, td[2] = {N, M}, wd[2] = {K, M}, bd[1] = {M};
    wf_tensor *w0 = init((wf_init){.kind = WF_INIT_GLOROT_UNIFORM, .seed = 11}, dt, 2, wd);
    wf_tensor *b0 = init((wf_init){.kind = WF_INIT_UNIFORM, .minval = -0.1, .maxval = 0.1, .seed = 12}, dt, 1, bd);
    CHECK_OK(wf_placeholder(m->g, "x", dt, 2, xd, &m->x));
    CHECK_OK(wf_placeholder(m->g, "t", dt, 2, td, &m->t));
    CHECK_OK(wf_variable(m->g, "W", w0, &m->W));
    CHECK_OK(wf_variable(m->g, "b", b0, &m->b));
    wf_tensor_free(w0);
    wf_tensor_free(b0);
    wf_output y, yb;
    CHECK_OK(wf_matmul(m->g, "y", m->x, m->W, 0, 0, &y));
    CHECK_OK(wf_add(m->g, "yb", y, m->b, &yb));
    CHECK_OK(wf_loss_mse(m->g, "loss", yb, m->t, &m->loss));
    m->xt = tens(dt, 2, xd, X);
    m->tt = tens(dt, 2, td, TG);
    wf_output vars[2] = {m->W, m->b};
    return wf_optimizer_minimize(m->g, "opt", o, m->loss, vars, 2, &m->targets, &m->n_targets);
}

static void free_net(net *m)
{
    wf_free(m->targets);
    wf_tensor_free(m->xt);
    wf_tensor_free(m->tt);
    wf_graph_free(m->g);
}

static double train_step(wf_session *s, net *m)
{
    wf_feed f[2] = {{m->x, m->xt}, {m->t, m->tt}};
    wf_run_options ro = {.targets = m->targets, .n_targets = m->n_targets};
    wf_tensor *l = NULL;
    CHECK_OK(wf_session_run(s, f, 2, &m->loss, 1, &l, &ro));
    double v = l ? at(l, 0) : NAN;
    wf_tensor_free(l);
    return v;
}

/* copies n values of variable `name` into v (NAN if absent) */
static void getv(wf_session *s, const char *name, double *v, int n)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_session_get_variable(s, name, &t));
    for (int i = 0; i < n; i++) v[i] = t && i < wf_tensor_size(t) ? at(t, i) : NAN;
    wf_tensor_free(t);
}

/* ---- the reference: Keras 3's update in double ---- */
typedef struct ref {
    double p[NW + M];             /* W then b */
    double m[NW + M], v[NW + M];
    int64_t s;
} ref;

static double ref_loss_grads(const double *p, double *g)
{
    const double *W = p, *b = p + NW;
    double loss = 0;
    memset(g, 0, sizeof(double) * (NW + M));
    for (int n = 0; n < N; n++)
        for (int j = 0; j < M; j++) {
            double y = b[j];
            for (int k = 0; k < K; k++) y += X[n * K + k] * W[k * M + j];
            double d = y - TG[n * M + j], dy = 2 * d / (N * M);
            loss += d * d / (N * M);
            for (int k = 0; k < K; k++) g[k * M + j] += X[n * K + k] * dy;
            g[NW + j] += dy;
        }
    return loss;
}

static double ref_lr(const wf_optimizer_options *o, int64_t s)
{
    switch (o->schedule) {
    case WF_LR_STEP: return o->learning_rate * pow(o->gamma, floor((double)s / (double)o->step_size));
    case WF_LR_COSINE: {
        double ds = (double)o->decay_steps, frac = fmin((double)s, ds) / ds;
        return o->learning_rate * ((1 - o->alpha) * (0.5 * (1 + cos(M_PI * frac))) + o->alpha);
    }
    default: return o->learning_rate;
    }
}

static double ref_step(const wf_optimizer_options *o, ref *r, double *clip_scale)
{
    double g[NW + M];
    double loss = ref_loss_grads(r->p, g);
    *clip_scale = 1;
    if (o->clip_global_norm > 0) {
        double ss = 0;
        for (int i = 0; i < NW + M; i++) ss += g[i] * g[i];
        double norm = sqrt(ss), c = o->clip_global_norm;
        *clip_scale = c * fmin(1 / norm, 1 / c);
        for (int i = 0; i < NW + M; i++) g[i] *= *clip_scale;
    }
    double lr = ref_lr(o, r->s), t = (double)(r->s + 1);
    double lr_t = lr * sqrt(1 - pow(o->beta2, t)) / (1 - pow(o->beta1, t));
    for (int i = 0; i < NW + M; i++) {
        double w = r->p[i];
        if (o->weight_decay > 0) w = w - w * o->weight_decay * lr;
        switch (o->kind) {
        case WF_OPT_SGD:
            if (o->momentum == 0) {
                w -= g[i] * lr;
            } else {
                r->m[i] = r->m[i] * o->momentum - g[i] * lr;
                w += o->nesterov ? r->m[i] * o->momentum - g[i] * lr : r->m[i];
            }
            break;
        case WF_OPT_ADAM:
        case WF_OPT_ADAMW:
            r->m[i] += (g[i] - r->m[i]) * (1 - o->beta1);
            r->v[i] += (g[i] * g[i] - r->v[i]) * (1 - o->beta2);
            w -= r->m[i] * lr_t / (sqrt(r->v[i]) + o->epsilon);
            break;
        default: {
            r->v[i] = r->v[i] * o->rho + g[i] * g[i] * (1 - o->rho);
            double inc = lr * g[i] / sqrt(r->v[i] + o->epsilon);
            if (o->momentum > 0) {
                r->m[i] = o->momentum * r->m[i] + inc;
                w -= r->m[i];
            } else {
                w -= inc;
            }
        }
        }
        r->p[i] = w;
    }
    r->s++;
    return loss;
}

static void close_all(const char *what, int step, const char *var, const double *got, const double *want, int n,
                      double tol)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
            CHECK_FAIL_("%s, step %d: %s[%d] = %.17g, reference %.17g", what, step, var, i, got[i], want[i]);
            return;
        }
}

/* Trains `steps` steps and compares the loss, W, b and every slot with the reference after each. */
static void run_case(const char *what, const wf_optimizer_options *o, int steps, int expect_clipping)
{
    net m;
    wf_status *st = build_net(&m, WF_F64, o);
    if (st) {
        CHECK_FAIL_("%s: %s", what, wf_status_message(st));
        wf_status_free(st);
        free_net(&m);
        return;
    }
    bool has_m = (o->kind == WF_OPT_SGD || o->kind == WF_OPT_RMSPROP) ? o->momentum > 0 : true;
    bool has_v = o->kind != WF_OPT_SGD;
    CHECK_INT(m.n_targets, 1 + 2 * (1 + has_m + has_v));
    wf_session *s;
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &s));
    ref r = {0};
    getv(s, "W", r.p, NW);
    getv(s, "b", r.p + NW, M);
    int clipped = 0;
    for (int k = 1; k <= steps; k++) {
        double scale, want = ref_step(o, &r, &scale);
        clipped += scale < 1;
        double loss = train_step(s, &m);
        CHECK_NEAR(loss, want, 1e-12 * (1 + fabs(want)));
        double got[NW + M];
        getv(s, "W", got, NW);
        getv(s, "b", got + NW, M);
        close_all(what, k, "W,b", got, r.p, NW + M, 1e-12);
        if (has_m) {
            getv(s, "opt/W/m", got, NW);
            getv(s, "opt/b/m", got + NW, M);
            close_all(what, k, "m", got, r.m, NW + M, 1e-12);
        }
        if (has_v) {
            getv(s, "opt/W/v", got, NW);
            getv(s, "opt/b/v", got + NW, M);
            close_all(what, k, "v", got, r.v, NW + M, 1e-12);
        }
        double sv;
        getv(s, "opt/step", &sv, 1);
        CHECK_INT((int64_t)sv, k);
    }
    if (expect_clipping >= 0) CHECK_INT(clipped > 0, expect_clipping);
    /* the model learnt something */
    wf_session_free(s);
    free_net(&m);
}

static void test_optimizers(void)
{
    wf_optimizer_options o;
    wf_optimizer_options_init(&o, WF_OPT_SGD);
    o.learning_rate = 0.1;
    run_case("SGD", &o, 5, -1);
    o.momentum = 0.9;
    run_case("SGD momentum", &o, 5, -1);
    o.nesterov = 1;
    run_case("SGD Nesterov", &o, 5, -1);
    o.nesterov = 0;
    o.weight_decay = 0.05;
    run_case("SGD momentum, weight decay", &o, 5, -1);

    wf_optimizer_options_init(&o, WF_OPT_ADAM);
    o.learning_rate = 0.05;
    run_case("Adam", &o, 6, -1);
    wf_optimizer_options_init(&o, WF_OPT_ADAMW);
    CHECK_NEAR(o.weight_decay, 0.004, 0);
    o.learning_rate = 0.05;
    o.weight_decay = 0.1;
    run_case("AdamW", &o, 6, -1);

    wf_optimizer_options_init(&o, WF_OPT_RMSPROP);
    o.learning_rate = 0.01;
    run_case("RMSprop", &o, 5, -1);
    o.momentum = 0.5;
    o.epsilon = 1e-3;
    run_case("RMSprop momentum", &o, 5, -1);

    /* clipping: the gradients' global norm here is about 3-10, so 0.5 clips every step and 1e3 none */
    wf_optimizer_options_init(&o, WF_OPT_SGD);
    o.learning_rate = 0.1;
    o.momentum = 0.8;
    o.clip_global_norm = 0.5;
    run_case("SGD momentum, clipped", &o, 5, 1);
    o.clip_global_norm = 1e3;
    run_case("SGD momentum, clip inactive", &o, 5, 0);
    wf_optimizer_options_init(&o, WF_OPT_ADAM);
    o.clip_global_norm = 0.5;
    run_case("Adam clipped", &o, 4, 1);

    /* schedules */
    wf_optimizer_options_init(&o, WF_OPT_SGD);
    o.learning_rate = 0.1;
    o.momentum = 0.5;
    o.schedule = WF_LR_STEP;
    o.step_size = 2;
    o.gamma = 0.5;
    run_case("SGD momentum, step schedule", &o, 6, -1);
    wf_optimizer_options_init(&o, WF_OPT_ADAM);
    o.learning_rate = 0.05;
    o.schedule = WF_LR_COSINE;
    o.decay_steps = 3;
    o.alpha = 0.1;
    run_case("Adam, cosine schedule (past decay_steps)", &o, 6, -1);
    wf_optimizer_options_init(&o, WF_OPT_ADAMW);
    o.learning_rate = 0.05;
    o.weight_decay = 0.2;
    o.schedule = WF_LR_STEP;
    o.step_size = 1;
    o.gamma = 0.7;
    o.clip_global_norm = 1.0;
    run_case("AdamW, step schedule, clipped", &o, 5, -1);
}

/* f32 variables: the same steps within f32 rounding (on `device`, NULL: the CPU) */
static void adam_f32(const char *device)
{
    wf_optimizer_options o;
    wf_optimizer_options_init(&o, WF_OPT_ADAM);
    o.learning_rate = 0.05;
    o.clip_global_norm = 2;
    net m;
    CHECK_OK(build_net(&m, WF_F32, &o));
    wf_session *s = NULL;
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = device;
    CHECK_OK(wf_session_new(ctx, m.g, &so, &s));
    if (!s) {
        free_net(&m);
        return;
    }
    ref r = {0};
    getv(s, "W", r.p, NW);
    getv(s, "b", r.p + NW, M);
    double first = NAN, last = NAN;
    for (int k = 1; k <= 5; k++) {
        double sc;
        ref_step(&o, &r, &sc);
        last = train_step(s, &m);
        if (k == 1) first = last;
        double got[NW + M];
        getv(s, "W", got, NW);
        getv(s, "b", got + NW, M);
        close_all(device ? device : "Adam f32", k, "W,b", got, r.p, NW + M, 1e-5);
    }
    CHECK(last < first);
    wf_session_free(s);
    free_net(&m);
}

static void test_optimizer_f32(void) { adam_f32(NULL); }

/* Every other device present (OPENCL:0 on PoCL when the plugin is found): training matches the
 * reference, and a bad sparse label is still an error naming it (the check happens on the host). */
static void test_devices(void)
{
    int tried = 0;
    for (int d = 0; d < wf_context_num_devices(ctx); d++) {
        wf_device_info info;
        CHECK_OK(wf_context_device(ctx, d, &info));
        if (!strcmp(info.type, "CPU")) continue;
        tried++;
        fprintf(stderr, "     on %s\n", info.name);
        adam_f32(info.name);
        wf_graph *g;
        CHECK_OK(wf_graph_new(&g));
        int64_t dl[2] = {LN, LC}, dn[1] = {LN};
        wf_output x, y, l;
        CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, dl, &x));
        CHECK_OK(wf_placeholder(g, "y", WF_I64, 1, dn, &y));
        CHECK_OK(wf_loss_softmax_cross_entropy(g, "xent", x, y, 1, &l));
        wf_session_options so;
        wf_session_options_init(&so);
        so.device = info.name;
        wf_session *s = NULL;
        CHECK_OK(wf_session_new(ctx, g, &so, &s));
        wf_tensor *xt = tens(WF_F32, 2, dl, LOGITS), *bad_t = tens(WF_I64, 1, dn, (const double[]){0, 7, 1, 1}),
                  *good = tens(WF_I64, 1, dn, LABELS), *r = NULL;
        wf_feed f[2] = {{x, xt}, {y, bad_t}};
        if (s) CHECK_ERR(wf_session_run(s, f, 2, &l, 1, &r, NULL), WF_INVALID_ARGUMENT, "target 7 at position 1");
        f[1].tensor = good;
        if (s) CHECK_OK(wf_session_run(s, f, 2, &l, 1, &r, NULL));
        if (r) CHECK(isfinite(at(r, 0)));
        wf_tensor_free(r);
        wf_tensor_free(xt);
        wf_tensor_free(bad_t);
        wf_tensor_free(good);
        wf_session_free(s);
        wf_graph_free(g);
    }
    if (!tried) fprintf(stderr, "     (no device besides the CPU: nothing to check)\n");
}

static void test_optimizer_errors(void)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    double w0[2] = {1, 2};
    int64_t d2[1] = {2};
    wf_tensor *t = tens(WF_F64, 1, d2, w0);
    wf_output w, unused, iv, y, loss, vec_loss, c;
    CHECK_OK(wf_variable(g, "w", t, &w));
    CHECK_OK(wf_variable(g, "unused", t, &unused));
    wf_tensor *ti = tens(WF_I64, 1, d2, w0);
    CHECK_OK(wf_variable(g, "int_var", ti, &iv));
    wf_tensor_free(ti);
    wf_tensor_free(t);
    CHECK_OK(wf_mul(g, "y", w, w, &y));
    wf_attr keep = wf_attr_int("keepdims", 0);
    CHECK_OK(wf_op(g, "ReduceSum", "loss", &y, 1, &keep, 1, NULL));
    CHECK_OK(wf_graph_output(g, "loss", &loss));
    vec_loss = y;
    CHECK_OK(wf_const_scalar(g, "c", WF_F64, 1, &c));
    int n0 = wf_graph_num_nodes(g);
    wf_output *tg = NULL;
    int nt = 0;
    wf_optimizer_options o;
    wf_optimizer_options_init(&o, WF_OPT_ADAM);
    wf_output both[2] = {w, unused};
    CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, loss, both, 2, &tg, &nt), WF_INVALID_ARGUMENT,
              "variable 'unused' has no gradient: the loss 'loss' does not depend on it");
    CHECK_INT(wf_graph_num_nodes(g), n0);
    wf_output twice[2] = {w, w};
    CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, loss, twice, 2, &tg, &nt), WF_INVALID_ARGUMENT, "given twice");
    CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, loss, &c, 1, &tg, &nt), WF_INVALID_ARGUMENT,
              "node 'c' (Const), is not a Variable");
    CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, loss, &iv, 1, &tg, &nt), WF_INVALID_ARGUMENT,
              "'int_var' is i64, not a float dtype");
    CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, vec_loss, &w, 1, &tg, &nt), WF_INVALID_ARGUMENT,
              "the loss 'y' is f64[2], not a float scalar");
    CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, loss, &w, 0, &tg, &nt), WF_INVALID_ARGUMENT, "no variables");
    enum { LR, MOM, B1, B2, EPS, RHO, WD, CLIP, STEP_SIZE, GAMMA, DECAY_STEPS, ALPHA, SCHEDULE, KIND };
    static const struct {
        wf_optimizer_kind kind;
        wf_lr_schedule schedule;
        int field;
        double value;
        const char *msg;
    } cases[] = {
        {WF_OPT_SGD, WF_LR_CONSTANT, LR, 0, "optimizer 'opt': learning_rate = 0, must be finite and > 0"},
        {WF_OPT_SGD, WF_LR_CONSTANT, LR, NAN, "learning_rate = nan"},
        {WF_OPT_SGD, WF_LR_CONSTANT, MOM, 1, "momentum = 1, must be in [0, 1)"},
        {WF_OPT_RMSPROP, WF_LR_CONSTANT, MOM, -0.5, "momentum = -0.5"},
        {WF_OPT_ADAM, WF_LR_CONSTANT, B1, 1, "beta1 = 1, must be in [0, 1)"},
        {WF_OPT_ADAMW, WF_LR_CONSTANT, B2, -0.1, "beta2 = -0.1"},
        {WF_OPT_ADAM, WF_LR_CONSTANT, EPS, -1, "epsilon = -1"},
        {WF_OPT_RMSPROP, WF_LR_CONSTANT, RHO, 1.5, "rho = 1.5"},
        {WF_OPT_ADAMW, WF_LR_CONSTANT, WD, -0.1, "weight_decay = -0.1"},
        {WF_OPT_SGD, WF_LR_CONSTANT, CLIP, -1, "clip_global_norm = -1"},
        {WF_OPT_SGD, WF_LR_STEP, STEP_SIZE, 0, "step_size = 0, must be >= 1"},
        {WF_OPT_SGD, WF_LR_STEP, GAMMA, 0, "gamma = 0"},
        {WF_OPT_ADAM, WF_LR_COSINE, DECAY_STEPS, 0, "decay_steps = 0"},
        {WF_OPT_ADAM, WF_LR_COSINE, ALPHA, 2, "alpha = 2, must be in [0, 1]"},
        {WF_OPT_ADAM, WF_LR_CONSTANT, SCHEDULE, 7, "schedule 7 is not"},
        {WF_OPT_ADAM, WF_LR_CONSTANT, KIND, 0, "kind 0 is not SGD, ADAM, ADAMW or RMSPROP"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wf_optimizer_options_init(&o, cases[i].kind);
        o.schedule = cases[i].schedule;
        double v = cases[i].value;
        switch (cases[i].field) {
        case LR: o.learning_rate = v; break;
        case MOM: o.momentum = v; break;
        case B1: o.beta1 = v; break;
        case B2: o.beta2 = v; break;
        case EPS: o.epsilon = v; break;
        case RHO: o.rho = v; break;
        case WD: o.weight_decay = v; break;
        case CLIP: o.clip_global_norm = v; break;
        case STEP_SIZE: o.step_size = (int64_t)v; break;
        case GAMMA: o.gamma = v; break;
        case DECAY_STEPS: o.decay_steps = (int64_t)v; break;
        case ALPHA: o.alpha = v; break;
        case SCHEDULE: o.schedule = (wf_lr_schedule)v; break;
        default: o.kind = (wf_optimizer_kind)v; break;
        }
        CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, loss, &w, 1, &tg, &nt), WF_INVALID_ARGUMENT, cases[i].msg);
    }
    CHECK_INT(wf_graph_num_nodes(g), n0);
    CHECK(tg == NULL);
    /* it works once, then the name is taken */
    wf_optimizer_options_init(&o, WF_OPT_SGD);
    CHECK_OK(wf_optimizer_minimize(g, "opt", &o, loss, &w, 1, &tg, &nt));
    CHECK_INT(nt, 2);
    wf_free(tg);
    tg = NULL;
    int n1 = wf_graph_num_nodes(g);
    CHECK_ERR(wf_optimizer_minimize(g, "opt", &o, loss, &w, 1, &tg, &nt), WF_ALREADY_EXISTS, "opt/step");
    CHECK_INT(wf_graph_num_nodes(g), n1);
    wf_graph_free(g);
}

/* 3 steps, save, restore into a new session, 2 more == 5 steps without a break, bit for bit */
static void test_optimizer_checkpoint(void)
{
    char dir[] = "/tmp/weft-train-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/adam.safetensors", dir);
    wf_optimizer_options o;
    wf_optimizer_options_init(&o, WF_OPT_ADAM);
    o.learning_rate = 0.05;
    o.schedule = WF_LR_COSINE;
    o.decay_steps = 4;
    net m;
    CHECK_OK(build_net(&m, WF_F32, &o));
    wf_session *a, *b;
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &a));
    for (int i = 0; i < 3; i++) train_step(a, &m);
    CHECK_OK(wf_session_save(a, path));
    for (int i = 0; i < 2; i++) train_step(a, &m);
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &b));
    CHECK_OK(wf_session_restore(b, path));
    for (int i = 0; i < 2; i++) train_step(b, &m);
    const char *names[] = {"W", "b", "opt/W/m", "opt/W/v", "opt/b/m", "opt/b/v", "opt/step"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        wf_tensor *ta = NULL, *tb = NULL;
        CHECK_OK(wf_session_get_variable(a, names[i], &ta));
        CHECK_OK(wf_session_get_variable(b, names[i], &tb));
        if (ta && tb) {
            CHECK(wf_tensor_bytes(ta) == wf_tensor_bytes(tb));
            if (memcmp(wf_tensor_data(ta), wf_tensor_data(tb), wf_tensor_bytes(ta)) != 0)
                CHECK_FAIL_("variable '%s' differs between 5 steps and 3 + restore + 2", names[i]);
        }
        wf_tensor_free(ta);
        wf_tensor_free(tb);
    }
    double sv;
    getv(b, "opt/step", &sv, 1);
    CHECK_INT((int64_t)sv, 5);
    unlink(path);
    rmdir(dir);
    wf_session_free(a);
    wf_session_free(b);
    free_net(&m);
}

int main(void)
{
    CHECK_OK(wf_context_new(NULL, &ctx));
    RUN_TEST(test_init_statistics);
    RUN_TEST(test_init_determinism);
    RUN_TEST(test_init_errors);
    RUN_TEST(test_loss_values);
    RUN_TEST(test_loss_extremes);
    RUN_TEST(test_loss_gradients);
    RUN_TEST(test_loss_errors);
    RUN_TEST(test_optimizers);
    RUN_TEST(test_optimizer_f32);
    RUN_TEST(test_devices);
    RUN_TEST(test_optimizer_errors);
    RUN_TEST(test_optimizer_checkpoint);
    wf_context_free(ctx);
    return check_summary();
}
