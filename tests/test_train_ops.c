/*
 * The training ops of graph/ops_train.c. ApplyAdam: against the formula evaluated here in double (and,
 * on the CPU, bit for bit against the same operations in the variable's own dtype, which is what the
 * composite optimizer graph computes), over shapes from rank 0 and empty to one past the parallel
 * threshold, plus bad inputs named in the error. StatelessRandomUniform: the documented hash recomputed
 * here, determinism, mean / variance / chi-square statistics, [0, 1), f16/bf16 as the f32 draw rounded
 * toward zero, and autodiff walking through it in a dropout.
 * Usage: test_train_ops [--device SPEC]: runs the ops on that device (strict placement) and requires
 * its random values to equal the CPU's bit for bit; a SPEC that no device matches is skipped.
 */
/* the bit-exact reference below rounds once per operation, as the kernels must */
#pragma GCC optimize("fp-contract=off")

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static wf_context *g_ctx;
static const char *g_device;

/* Does any device of the context match spec? (as tests/gradcheck.h, without its gradient checker) */
static int device_present(const char *spec)
{
    wf_device_spec want, have;
    int found = 0;
    CHECK_OK(wf_device_spec_parse(spec, &want));
    for (int i = 0; i < wf_context_num_devices(g_ctx); i++) {
        wf_device_info info;
        if (wf_context_device(g_ctx, i, &info)) continue;
        if (!wf_device_spec_parse(info.name, &have) && wf_device_spec_matches(&want, &have)) found = 1;
    }
    return found;
}

/* ---- helpers ----------------------------------------------------------------------------------- */

static uint64_t g_lcg = 0x2545F4914F6CDD1Dull;
static double rnd(double lo, double hi)
{
    g_lcg = g_lcg * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(g_lcg >> 11) * 0x1.0p-53;
}

static wf_tensor *tens(wf_dtype dt, int rank, const int64_t *dims, double lo, double hi)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(dt, rank, dims, NULL, &t));
    for (int64_t i = 0; t && i < wf_tensor_size(t); i++) {
        double v = rnd(lo, hi);
        if (dt == WF_F64) ((double *)wf_tensor_data(t))[i] = v;
        else ((float *)wf_tensor_data(t))[i] = (float)v;
    }
    return t;
}

static wf_tensor *scalar(wf_dtype dt, double v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(dt, 0, NULL, NULL, &t));
    if (!t) return NULL;
    if (dt == WF_F64) *(double *)wf_tensor_data(t) = v;
    else if (dt == WF_F32) *(float *)wf_tensor_data(t) = (float)v;
    else if (dt == WF_I64) *(int64_t *)wf_tensor_data(t) = (int64_t)v;
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
    default: return NAN;
    }
}

static wf_session *session(wf_graph *g, const char *device)
{
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = device;
    so.strict_placement = device != NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(g_ctx, g, &so, &s));
    return s;
}

/* ---- ApplyAdam --------------------------------------------------------------------------------- */

static const char *const g_in_names[] = {"w", "m", "v", "g", "lr_t", "one_minus_beta1", "one_minus_beta2", "epsilon"};

/* The eight placeholders (four of `dims`, four rank-0) and the node. */
static wf_status *build_adam(wf_graph *g, wf_dtype dt, int rank, const int64_t *dims, wf_output *ph, wf_node **n)
{
    for (int i = 0; i < 8; i++) {
        wf_status *s = wf_placeholder(g, g_in_names[i], dt, i < 4 ? rank : 0, dims, &ph[i]);
        if (s) return s;
    }
    return wf_op(g, "ApplyAdam", "adam", ph, 8, NULL, 0, n);
}

static void check_adam(wf_dtype dt, int rank, const int64_t *dims)
{
    char what[96];
    snprintf(what, sizeof what, "ApplyAdam %s rank %d [%lld%s]", wf_dtype_name(dt), rank,
             rank ? (long long)dims[0] : 0LL, rank > 1 ? ",..." : "");
    wf_graph *g = NULL;
    wf_session *s = NULL;
    wf_tensor *in[8] = {0}, *out[3] = {0};
    CHECK_OK(wf_graph_new(&g));
    wf_output ph[8];
    wf_node *n = NULL;
    CHECK_OK(build_adam(g, dt, rank, dims, ph, &n));
    if (!n) goto done;
    in[0] = tens(dt, rank, dims, -1, 1);
    in[1] = tens(dt, rank, dims, -0.1, 0.1);
    in[2] = tens(dt, rank, dims, 0, 0.01);
    in[3] = tens(dt, rank, dims, -1, 1);
    /* lr_t as Adam's bias-corrected rate at step 3, then 1 - beta1, 1 - beta2 and epsilon */
    double lr = 0.001 * sqrt(1 - pow(0.999, 3)) / (1 - pow(0.9, 3));
    in[4] = scalar(dt, lr);
    in[5] = scalar(dt, 1 - 0.9);
    in[6] = scalar(dt, 1 - 0.999);
    in[7] = scalar(dt, 1e-7);
    wf_feed feeds[8];
    for (int i = 0; i < 8; i++) feeds[i] = (wf_feed){ph[i], in[i]};
    wf_output fetch[3] = {wf_out(n, 0), wf_out(n, 1), wf_out(n, 2)};
    s = session(g, g_device);
    if (!s) goto done;
    CHECK_OK(wf_session_run(s, feeds, 8, fetch, 3, out, NULL));
    if (!out[0] || !out[1] || !out[2]) goto done;
    int64_t numel = wf_tensor_size(in[0]);
    for (int j = 0; j < 3; j++) {
        CHECK_INT(wf_tensor_dtype(out[j]), dt);
        CHECK_INT(wf_tensor_rank(out[j]), rank);
        CHECK_INT(wf_tensor_size(out[j]), numel);
    }
    double ulp = dt == WF_F64 ? 0x1.0p-52 : 0x1.0p-23;
    double b1 = at(in[5], 0), b2 = at(in[6], 0), eps = at(in[7], 0), lrv = at(in[4], 0);
    int bad = 0, inexact = 0;
    for (int64_t i = 0; i < numel && bad < 5; i++) {
        double w = at(in[0], i), m = at(in[1], i), v = at(in[2], i), gr = at(in[3], i);
        /* the formula in double */
        double m2 = m + (gr - m) * b1, v2 = v + (gr * gr - v) * b2;
        double step = (m2 * lrv) / (sqrt(v2) + eps), w2 = w - step;
        double tm = 8 * ulp * (fabs(m) + fabs(gr)), tv = 8 * ulp * (v + gr * gr), tw = 8 * ulp * (fabs(w) + fabs(step));
        double gm = at(out[1], i), gv = at(out[2], i), gw = at(out[0], i);
        if (!(fabs(gm - m2) <= tm && fabs(gv - v2) <= tv && fabs(gw - w2) <= tw)) {
            CHECK_FAIL_("%s: element %lld: (w, m, v) = (%.9g, %.9g, %.9g), reference (%.9g, %.9g, %.9g)", what,
                        (long long)i, gw, gm, gv, w2, m2, v2);
            bad++;
        }
        /* one rounding per operation in the dtype: the composite graph's values */
        if (dt == WF_F32) {
            float fw = (float)w, fm = (float)m, fv = (float)v, fg = (float)gr;
            float fd = fg - fm, fmi = fd * (float)b1, fm2 = fm + fmi;
            float fg2 = fg * fg, fdv = fg2 - fv, fvi = fdv * (float)b2, fv2 = fv + fvi;
            float fn = fm2 * (float)lrv, fs = sqrtf(fv2), fden = fs + (float)eps, fst = fn / fden, fw2 = fw - fst;
            if ((float)gw != fw2 || (float)gm != fm2 || (float)gv != fv2) inexact++;
        } else if (gw != w2 || gm != m2 || gv != v2) {
            inexact++;
        }
    }
    /* the CPU must equal the composite graph exactly; a device may round sqrt or division differently */
    if (!g_device && inexact) CHECK_FAIL_("%s: %d elements differ from the per-operation rounding", what, inexact);
    if (g_device && inexact) fprintf(stderr, "note: %s on %s: %d elements not bit-equal to the CPU rounding\n", what,
                                     g_device, inexact);
done:
    for (int i = 0; i < 8; i++) wf_tensor_free(in[i]);
    for (int j = 0; j < 3; j++) wf_tensor_free(out[j]);
    wf_session_free(s);
    wf_graph_free(g);
}

static void test_apply_adam(void)
{
    static const int64_t d7[] = {7}, d0[] = {0}, d30[] = {3, 0}, d45[] = {4, 5}, d234[] = {2, 3, 4},
                         big[] = {70001}, big2[] = {129, 1031};
    const wf_dtype dts[] = {WF_F32, WF_F64};
    for (int k = 0; k < 2; k++) {
        check_adam(dts[k], 0, NULL);
        check_adam(dts[k], 1, d0);
        check_adam(dts[k], 2, d30);
        check_adam(dts[k], 1, d7);
        check_adam(dts[k], 2, d45);
        check_adam(dts[k], 3, d234);
        check_adam(dts[k], 1, big);  /* past twice the parallel grain: split over the pool */
        check_adam(dts[k], 2, big2);
    }
}

static void test_apply_adam_bad(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    if (!g) return;
    static const int64_t d4[] = {4}, d3[] = {3}, d2[] = {2};
    wf_output ph[8], x;
    for (int i = 0; i < 8; i++) CHECK_OK(wf_placeholder(g, g_in_names[i], WF_F32, i < 4 ? 1 : 0, d4, &ph[i]));
    int n0 = wf_graph_num_nodes(g);
    wf_output in[8];
    memcpy(in, ph, sizeof in);
    CHECK_OK(wf_placeholder(g, "m3", WF_F32, 1, d3, &x));
    in[1] = x;
    CHECK_ERR(wf_op(g, "ApplyAdam", "a1", in, 8, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'm' f32[3]");
    memcpy(in, ph, sizeof in);
    CHECK_OK(wf_placeholder(g, "g64", WF_F64, 1, d4, &x));
    in[3] = x;
    CHECK_ERR(wf_op(g, "ApplyAdam", "a2", in, 8, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'g' f64[4]");
    memcpy(in, ph, sizeof in);
    CHECK_OK(wf_placeholder(g, "lr2", WF_F32, 1, d2, &x));
    in[4] = x;
    CHECK_ERR(wf_op(g, "ApplyAdam", "a3", in, 8, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'lr_t'");
    memcpy(in, ph, sizeof in);
    CHECK_OK(wf_placeholder(g, "eps64", WF_F64, 0, NULL, &x));
    in[7] = x;
    CHECK_ERR(wf_op(g, "ApplyAdam", "a4", in, 8, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'epsilon'");
    memcpy(in, ph, sizeof in);
    CHECK_OK(wf_placeholder(g, "wi", WF_I32, 1, d4, &x));
    in[0] = x;
    CHECK_ERR(wf_op(g, "ApplyAdam", "a5", in, 8, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'w'");
    CHECK_ERR(wf_op(g, "ApplyAdam", "a6", ph, 7, NULL, 0, NULL), WF_INVALID_ARGUMENT, "ApplyAdam");
    CHECK_INT(wf_graph_num_nodes(g), n0 + 5); /* the five placeholders; no failed node stayed */
    /* shapes unknown while building are checked by the kernel, which names the input too */
    static const int64_t unk[] = {-1};
    wf_output ph2[8];
    for (int i = 0; i < 8; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "u_%s", g_in_names[i]);
        CHECK_OK(wf_placeholder(g, nm, WF_F32, i < 4 ? 1 : 0, unk, &ph2[i]));
    }
    wf_node *n = NULL;
    CHECK_OK(wf_op(g, "ApplyAdam", "a7", ph2, 8, NULL, 0, &n));
    wf_tensor *t4 = tens(WF_F32, 1, d4, 0, 1), *t3 = tens(WF_F32, 1, d3, 0, 1), *sc = scalar(WF_F32, 0.5), *out = NULL;
    wf_feed f[8];
    for (int i = 0; i < 8; i++) f[i] = (wf_feed){ph2[i], i == 2 ? t3 : i < 4 ? t4 : sc};
    wf_session *s = session(g, g_device);
    wf_output o0 = wf_out(n, 0);
    if (s && n) CHECK_ERR(wf_session_run(s, f, 8, &o0, 1, &out, NULL), WF_INVALID_ARGUMENT, "input 'v'");
    wf_tensor_free(out);
    wf_session_free(s);
    wf_tensor_free(t4);
    wf_tensor_free(t3);
    wf_tensor_free(sc);
    wf_graph_free(g);
}

/* ---- FusedBatchNorm ---------------------------------------------------------------------------- */

/* Shapes unknown while building are checked when the run meets them (by inference on the fed shapes,
 * then again by the device's kernel, in the same words): the message names the node and the input at
 * fault, and the same session then runs good input, and its values match the batch's statistics computed
 * here. */
static void test_fused_bn_kernel_checks(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    if (!g) return;
    static const int64_t xd[] = {-1, -1, 4}, pd[] = {-1};
    wf_output x, sc, of, dy;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 3, xd, &x));
    CHECK_OK(wf_placeholder(g, "scale", WF_F32, 1, pd, &sc));
    CHECK_OK(wf_placeholder(g, "offset", WF_F32, 1, pd, &of));
    CHECK_OK(wf_placeholder(g, "dy", WF_F32, 3, xd, &dy));
    wf_node *bn = NULL, *gr = NULL;
    CHECK_OK(wf_op(g, "FusedBatchNorm", "bn", (wf_output[]){x, sc, of}, 3, NULL, 0, &bn));
    if (!bn) goto out;
    CHECK_OK(wf_op(g, "FusedBatchNormGrad", "bn_grad",
                   (wf_output[]){dy, x, sc, wf_out(bn, 1), wf_out(bn, 2)}, 5, NULL, 0, &gr));
    if (!gr) goto out;
    wf_session *s = session(g, g_device);
    static const int64_t d234[] = {2, 3, 4}, d244[] = {2, 4, 4}, d3[] = {3}, d4[] = {4};
    wf_tensor *xt = tens(WF_F32, 3, d234, -2, 2), *dy_bad = tens(WF_F32, 3, d244, -1, 1);
    wf_tensor *s3 = tens(WF_F32, 1, d3, 0.5, 1.5), *o3 = tens(WF_F32, 1, d3, -1, 1), *s4 = tens(WF_F32, 1, d4, 0.5, 1.5);
    wf_output y = wf_out(bn, 0), dx = wf_out(gr, 0);
    wf_tensor *out = NULL;
    if (s) {
        wf_feed f[3] = {{x, xt}, {sc, s4}, {of, o3}};
        CHECK_ERR(wf_session_run(s, f, 3, &y, 1, &out, NULL), WF_INVALID_ARGUMENT, "scale f32[4] must be 1-D with one value per channel");
        wf_tensor_free(out);
        out = NULL;
        wf_feed f2[4] = {{x, xt}, {sc, s3}, {of, o3}, {dy, dy_bad}};
        CHECK_ERR(wf_session_run(s, f2, 4, &dx, 1, &out, NULL), WF_INVALID_ARGUMENT, "dy f32[2,4,4] must have the dtype and shape of x f32[2,3,4]");
        wf_tensor_free(out);
        out = NULL;
        /* the session stays usable: y by the batch's statistics (biased variance, epsilon 1e-5) */
        f[1].tensor = s3;
        CHECK_OK(wf_session_run(s, f, 3, &y, 1, &out, NULL));
        if (out) {
            const float *xv = wf_tensor_data(xt), *yv = wf_tensor_data(out), *sv = wf_tensor_data(s3),
                        *ov = wf_tensor_data(o3);
            int bad = 0;
            for (int c = 0; c < 3; c++) {
                double m = 0, v = 0;
                for (int n = 0; n < 2; n++)
                    for (int i = 0; i < 4; i++) m += xv[(n * 3 + c) * 4 + i] / 8.0;
                for (int n = 0; n < 2; n++)
                    for (int i = 0; i < 4; i++) v += (xv[(n * 3 + c) * 4 + i] - m) * (xv[(n * 3 + c) * 4 + i] - m) / 8.0;
                for (int n = 0; n < 2; n++)
                    for (int i = 0; i < 4; i++) {
                        int j = (n * 3 + c) * 4 + i;
                        double want = (xv[j] - m) / sqrt(v + 1e-5) * sv[c] + ov[c];
                        bad += fabs(yv[j] - want) > 1e-5 * (1 + fabs(want));
                    }
            }
            CHECK_INT(bad, 0);
        }
        wf_tensor_free(out);
    }
    wf_session_free(s);
    wf_tensor_free(xt);
    wf_tensor_free(dy_bad);
    wf_tensor_free(s3);
    wf_tensor_free(o3);
    wf_tensor_free(s4);
out:
    wf_graph_free(g);
}

/* ---- StatelessRandomUniform -------------------------------------------------------------------- */

/* The hash as ops_train.c / kutil_random.h document it, written out again here. */
static uint64_t ref_mix(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t ref_bits(int64_t seed, int64_t counter, uint64_t i)
{
    uint64_t key = ref_mix(ref_mix((uint64_t)seed + 0x9E3779B97F4A7C15ull) + (uint64_t)counter * 0xD1B54A32D192ED03ull);
    return ref_mix(key + (i + 1) * 0x9E3779B97F4A7C15ull);
}

/* Draws StatelessRandomUniform(like of dt[dims], counter; seed) on device (NULL: CPU). */
static wf_tensor *draw(const char *device, wf_dtype dt, int rank, const int64_t *dims, int64_t seed, int64_t counter)
{
    wf_graph *g = NULL;
    wf_session *s = NULL;
    wf_tensor *like = NULL, *c = scalar(WF_I64, (double)counter), *out = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output ph, pc, u;
    wf_node *n = NULL;
    CHECK_OK(wf_placeholder(g, "like", dt, rank, dims, &ph));
    CHECK_OK(wf_placeholder(g, "counter", WF_I64, 0, NULL, &pc));
    wf_output in[2] = {ph, pc};
    wf_attr a = wf_attr_int("seed", seed);
    CHECK_OK(wf_op(g, "StatelessRandomUniform", "u", in, 2, &a, 1, &n));
    CHECK_OK(wf_tensor_new(dt, rank, dims, NULL, &like)); /* zeros: only its shape and dtype matter */
    if (n && like && c && (s = session(g, device))) {
        u = wf_out(n, 0);
        wf_feed f[2] = {{ph, like}, {pc, c}};
        CHECK_OK(wf_session_run(s, f, 2, &u, 1, &out, NULL));
    }
    wf_session_free(s);
    wf_graph_free(g);
    wf_tensor_free(like);
    wf_tensor_free(c);
    return out;
}

static int same_bits(const wf_tensor *a, const wf_tensor *b)
{
    return a && b && wf_tensor_size(a) == wf_tensor_size(b) && wf_tensor_dtype(a) == wf_tensor_dtype(b) &&
           !memcmp(wf_tensor_data(a), wf_tensor_data(b), (size_t)wf_tensor_size(a) * wf_dtype_size(wf_tensor_dtype(a)));
}

/* Regularised upper incomplete gamma Q(a, x), by the series of P for x < a + 1 and Legendre's continued
 * fraction (modified Lentz) otherwise: the chi-square tail of 2a degrees of freedom at 2x. */
static double gamma_q(double a, double x)
{
    double lg = lgamma(a);
    if (x < a + 1) {
        double sum = 1 / a, term = sum;
        for (int n = 1; n < 1000; n++) {
            term *= x / (a + n);
            sum += term;
            if (term < sum * 1e-17) break;
        }
        return 1 - sum * exp(-x + a * log(x) - lg);
    }
    double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
    for (int i = 1; i < 1000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-16) break;
    }
    return exp(-x + a * log(x) - lg) * h;
}

static void check_uniform_stats(const char *what, const wf_tensor *t)
{
    if (!t) return;
    int64_t n = wf_tensor_size(t);
    double s = 0, s2 = 0, lo = 1, hi = 0;
    int64_t bins[16] = {0};
    for (int64_t i = 0; i < n; i++) {
        double v = at(t, i);
        if (!(v >= 0 && v < 1)) {
            CHECK_FAIL_("%s: value %.17g at %lld is outside [0, 1)", what, v, (long long)i);
            return;
        }
        s += v;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
        bins[(int)(v * 16)]++;
    }
    double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (at(t, i) - mean) * (at(t, i) - mean);
    double var = s2 / (double)(n - 1);
    /* five standard errors: 1/12 is the variance of U(0,1); the sample variance's own variance is
     * (mu4 - sigma^4) / n with mu4 = 1/80 */
    double se_mean = sqrt(1.0 / 12 / (double)n), se_var = sqrt((1.0 / 80 - 1.0 / 144) / (double)n);
    if (fabs(mean - 0.5) > 5 * se_mean) CHECK_FAIL_("%s: mean %.6f, expected 0.5 +- %.2g", what, mean, 5 * se_mean);
    if (fabs(var - 1.0 / 12) > 5 * se_var)
        CHECK_FAIL_("%s: variance %.6f, expected %.6f +- %.2g", what, var, 1.0 / 12, 5 * se_var);
    double chi = 0, e = (double)n / 16;
    for (int b = 0; b < 16; b++) chi += ((double)bins[b] - e) * ((double)bins[b] - e) / e;
    double p = gamma_q(7.5, chi / 2); /* 15 degrees of freedom */
    if (!(p > 1e-6)) CHECK_FAIL_("%s: chi-square %.2f over 16 bins, p = %.3g < 1e-6", what, chi, p);
    /* both ends reached (f16's largest value below 1 is 1 - 2^-11) */
    if (!(lo < 1e-3 && hi > 1 - 1e-3)) CHECK_FAIL_("%s: values span [%.6g, %.6g]", what, lo, hi);
}

static void test_random_values(void)
{
    const int64_t n1m[] = {1000000}, d23[] = {2, 3, 5};
    wf_tensor *a = draw(g_device, WF_F32, 1, n1m, 42, 7);
    wf_tensor *b = draw(g_device, WF_F32, 1, n1m, 42, 7);
    wf_tensor *c = draw(g_device, WF_F32, 1, n1m, 42, 8);
    wf_tensor *d = draw(g_device, WF_F32, 1, n1m, 43, 7);
    CHECK(same_bits(a, b));
    check_uniform_stats("f32 seed 42 counter 7", a);
    check_uniform_stats("f32 seed 42 counter 8", c);
    check_uniform_stats("f32 seed 43 counter 7", d);
    /* another counter or seed: a new stream, equal only where two independent draws collide (2^-24) */
    int64_t eq_c = 0, eq_d = 0;
    for (int64_t i = 0; a && c && d && i < 1000000; i++) {
        eq_c += at(a, i) == at(c, i);
        eq_d += at(a, i) == at(d, i);
    }
    CHECK(eq_c < 10 && eq_d < 10);
    /* the documented hash, element for element */
    int bad = 0;
    for (int64_t i = 0; a && i < 1000000 && bad < 5; i += 997)
        if ((float)at(a, i) != (float)(ref_bits(42, 7, (uint64_t)i) >> 40) * 0x1.0p-24f) {
            CHECK_FAIL_("f32 element %lld: %.9g, the documented hash gives %.9g", (long long)i, at(a, i),
                        (float)(ref_bits(42, 7, (uint64_t)i) >> 40) * 0x1.0p-24f);
            bad++;
        }
    /* shape only decides the count: a [2,3,5] draw is the first 30 values of the stream */
    wf_tensor *e = draw(g_device, WF_F32, 3, d23, 42, 7);
    CHECK(e && wf_tensor_rank(e) == 3 && wf_tensor_size(e) == 30);
    for (int64_t i = 0; a && e && i < 30; i++) CHECK(at(e, i) == at(a, i));
    /* f64: the top 53 bits */
    const int64_t n200k[] = {200000};
    wf_tensor *f = draw(g_device, WF_F64, 1, n200k, -5, 123456789012345LL);
    check_uniform_stats("f64", f);
    for (int64_t i = 0; f && i < 200000 && bad < 5; i += 991)
        if (at(f, i) != (double)(ref_bits(-5, 123456789012345LL, (uint64_t)i) >> 11) * 0x1.0p-53) {
            CHECK_FAIL_("f64 element %lld differs from the documented hash", (long long)i);
            bad++;
        }
    /* f16 / bf16: the f32 draw rounded toward zero, still in [0, 1) */
    wf_tensor *h = draw(g_device, WF_F16, 1, n200k, 42, 7), *bh = draw(g_device, WF_BF16, 1, n200k, 42, 7);
    for (int64_t i = 0; a && h && bh && i < 200000 && bad < 5; i++) {
        double x = at(a, i), vh = at(h, i), vb = at(bh, i);
        /* the next value up in each format is more than x */
        double uh = x < 0x1.0p-14 ? 0x1.0p-24 : ldexp(1, ilogb(x) - 10), ub = x == 0 ? 1 : ldexp(1, ilogb(x) - 7);
        if (!(vh <= x && x < vh + uh && vb <= x && x < vb + ub && vh < 1 && vb < 1)) {
            CHECK_FAIL_("element %lld: f32 %.9g, f16 %.9g, bf16 %.9g: not rounded toward zero", (long long)i, x, vh, vb);
            bad++;
        }
    }
    check_uniform_stats("f16", h);
    /* empty and rank 0 */
    const int64_t d0[] = {0};
    wf_tensor *z = draw(g_device, WF_F32, 1, d0, 1, 1), *r0 = draw(g_device, WF_F32, 0, NULL, 42, 7);
    CHECK(z && wf_tensor_size(z) == 0);
    CHECK(r0 && a && wf_tensor_size(r0) == 1 && at(r0, 0) == at(a, 0));
    /* on a device: bit-identical to the CPU */
    if (g_device) {
        wf_tensor *ca = draw(NULL, WF_F32, 1, n1m, 42, 7), *cf = draw(NULL, WF_F64, 1, n200k, -5, 123456789012345LL);
        wf_tensor *ch = draw(NULL, WF_F16, 1, n200k, 42, 7), *cb = draw(NULL, WF_BF16, 1, n200k, 42, 7);
        CHECK(same_bits(ca, a));
        CHECK(same_bits(cf, f));
        CHECK(same_bits(ch, h));
        CHECK(same_bits(cb, bh));
        wf_tensor_free(ca);
        wf_tensor_free(cf);
        wf_tensor_free(ch);
        wf_tensor_free(cb);
    }
    wf_tensor *all[] = {a, b, c, d, e, f, h, bh, z, r0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

static void test_random_bad(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    if (!g) return;
    static const int64_t d4[] = {4}, d1[] = {1};
    wf_output x, xi, c, c32, c1;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d4, &x));
    CHECK_OK(wf_placeholder(g, "xi", WF_I32, 1, d4, &xi));
    CHECK_OK(wf_placeholder(g, "c", WF_I64, 0, NULL, &c));
    CHECK_OK(wf_placeholder(g, "c32", WF_I32, 0, NULL, &c32));
    CHECK_OK(wf_placeholder(g, "c1", WF_I64, 1, d1, &c1));
    wf_output in[2] = {xi, c};
    CHECK_ERR(wf_op(g, "StatelessRandomUniform", "r1", in, 2, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'like' i32[4]");
    in[0] = x;
    in[1] = c32;
    CHECK_ERR(wf_op(g, "StatelessRandomUniform", "r2", in, 2, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'counter' i32");
    in[1] = c1;
    CHECK_ERR(wf_op(g, "StatelessRandomUniform", "r3", in, 2, NULL, 0, NULL), WF_INVALID_ARGUMENT, "input 'counter' i64[1]");
    wf_graph_free(g);
}

/* Dropout as training builds it: y = x * (u >= rate) / (1 - rate) with u drawn like x. The gradient
 * reaches x through the multiplication only (StatelessRandomUniform gives none), and equals the mask
 * over 1 - rate. */
static void test_random_dropout_grad(void)
{
    wf_graph *g = NULL;
    wf_session *s = NULL;
    wf_tensor *xt = NULL, *ct = scalar(WF_I64, 3), *res[3] = {0};
    CHECK_OK(wf_graph_new(&g));
    static const int64_t d[] = {8, 16};
    wf_output x, c, u, rate, keep, mask, xm, inv, y, loss, dx;
    wf_node *n = NULL;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, d, &x));
    CHECK_OK(wf_placeholder(g, "counter", WF_I64, 0, NULL, &c));
    wf_output in[2] = {x, c};
    wf_attr seed = wf_attr_int("seed", 9);
    CHECK_OK(wf_op(g, "StatelessRandomUniform", "u", in, 2, &seed, 1, &n));
    if (!n) goto done;
    u = wf_out(n, 0);
    CHECK_OK(wf_const_scalar(g, "rate", WF_F32, 0.25, &rate));
    CHECK_OK(wf_binary(g, "GreaterEqual", "keep", u, rate, &keep));
    wf_attr to = wf_attr_dtype("to", WF_F32);
    wf_node *mn = NULL, *ln = NULL;
    CHECK_OK(wf_op(g, "Cast", "mask", &keep, 1, &to, 1, &mn));
    if (!mn) goto done;
    mask = wf_out(mn, 0);
    CHECK_OK(wf_mul(g, "xm", x, mask, &xm));
    CHECK_OK(wf_const_scalar(g, "inv", WF_F32, 1 / 0.75, &inv));
    CHECK_OK(wf_mul(g, "y", xm, inv, &y));
    wf_attr k0 = wf_attr_int("keepdims", 0);
    CHECK_OK(wf_op(g, "ReduceSum", "loss", &y, 1, &k0, 1, &ln));
    if (!ln) goto done;
    loss = wf_out(ln, 0);
    CHECK_OK(wf_gradients(g, &loss, 1, NULL, &x, 1, &dx));
    xt = tens(WF_F32, 2, d, -1, 1);
    if (!dx.node || !(s = session(g, g_device))) goto done;
    wf_feed f[2] = {{x, xt}, {c, ct}};
    wf_output fetch[3] = {dx, u, y};
    CHECK_OK(wf_session_run(s, f, 2, fetch, 3, res, NULL));
    int kept = 0;
    for (int64_t i = 0; res[0] && res[1] && res[2] && i < 128; i++) {
        double m = at(res[1], i) >= (double)0.25f ? 1 : 0;
        kept += (int)m;
        CHECK_NEAR(at(res[0], i), m * (double)(float)(1 / 0.75), 1e-6);
        CHECK_NEAR(at(res[2], i), at(xt, i) * m * (double)(float)(1 / 0.75), 1e-6);
    }
    CHECK(kept > 64 && kept < 128); /* about 96 of 128 kept */
done:
    for (int i = 0; i < 3; i++) wf_tensor_free(res[i]);
    wf_tensor_free(xt);
    wf_tensor_free(ct);
    wf_session_free(s);
    wf_graph_free(g);
}

/* wf_optimizer_minimize: ADAMW on an f32 variable is one ApplyAdam fed the decayed weight, with its
 * outputs assigned; an f16 variable keeps the composite graph. */
static void test_optimizer_uses_apply_adam(void)
{
    static const int64_t d[] = {3, 2};
    const wf_dtype dts[] = {WF_F32, WF_F16};
    for (int k = 0; k < 2; k++) {
        wf_graph *g = NULL;
        wf_session *s = NULL;
        wf_tensor *w0 = NULL;
        CHECK_OK(wf_graph_new(&g));
        CHECK_OK(wf_tensor_new(dts[k], 2, d, NULL, &w0));
        if (!g || !w0) goto next;
        for (int64_t i = 0; i < 6; i++) {
            if (dts[k] == WF_F32) ((float *)wf_tensor_data(w0))[i] = 1;
            else ((uint16_t *)wf_tensor_data(w0))[i] = wf_f32_to_f16(1);
        }
        wf_output w, sq, loss, *targets = NULL;
        int n_targets = 0;
        CHECK_OK(wf_variable(g, "W", w0, &w));
        CHECK_OK(wf_mul(g, "sq", w, w, &sq));
        wf_attr k0 = wf_attr_int("keepdims", 0);
        wf_node *ln = NULL;
        CHECK_OK(wf_op(g, "ReduceSum", "loss", &sq, 1, &k0, 1, &ln));
        if (!ln) goto next;
        loss = wf_out(ln, 0);
        wf_optimizer_options o;
        wf_optimizer_options_init(&o, WF_OPT_ADAMW);
        CHECK_OK(wf_optimizer_minimize(g, "opt", &o, loss, &w, 1, &targets, &n_targets));
        CHECK_INT(n_targets, 4); /* the counter, W, m, v */
        wf_node *n = NULL, *nm = NULL;
        wf_status *st = wf_graph_find(g, "opt/W/apply_adam", &n);
        if (dts[k] == WF_F32) {
            CHECK(!st && n && !strcmp(wf_node_op(n), "ApplyAdam"));
            if (n) CHECK(!strcmp(wf_node_name(wf_node_input(n, 0).node), "opt/W/decayed"));
            wf_status_free(wf_graph_find(g, "opt/W/m_new", &nm));
            CHECK(!nm);
            s = session(g, g_device);
            wf_run_options ro = {.targets = targets, .n_targets = n_targets};
            wf_tensor *wv = NULL;
            if (s) CHECK_OK(wf_session_run(s, NULL, 0, NULL, 0, NULL, &ro));
            if (s) CHECK_OK(wf_session_run(s, NULL, 0, &w, 1, &wv, NULL));
            /* W = 1, gradient 2: decayed to 1 - 0.004 * 0.001, then Adam's first step, lr * g / |g| */
            double m1 = 0.1 * 2, v1 = 0.001 * 4, lr_t = 0.001 * sqrt(1 - 0.999) / (1 - 0.9);
            double want = (1 - 0.004 * 0.001) - m1 * lr_t / (sqrt(v1) + 1e-7);
            for (int64_t i = 0; wv && i < 6; i++) CHECK_NEAR(at(wv, i), want, 1e-6);
            wf_tensor_free(wv);
        } else {
            CHECK(st != NULL);
            wf_status_free(wf_graph_find(g, "opt/W/m_new", &nm));
            CHECK(nm != NULL);
        }
        if (st) wf_status_free(st);
        wf_free(targets);
    next:
        wf_session_free(s);
        wf_tensor_free(w0);
        wf_graph_free(g);
    }
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--device")) g_device = argv[2];
    CHECK_OK(wf_context_new(NULL, &g_ctx));
    if (!g_ctx) return 1;
    if (g_device && !device_present(g_device)) {
        CHECK_SKIP("test_train_ops", "no device matches %s", g_device);
        check_skipped_++;
        check_summary();
        wf_context_free(g_ctx);
        return 0;
    }
    RUN_TEST(test_apply_adam);
    RUN_TEST(test_apply_adam_bad);
    RUN_TEST(test_fused_bn_kernel_checks);
    RUN_TEST(test_random_values);
    RUN_TEST(test_random_bad);
    RUN_TEST(test_random_dropout_grad);
    RUN_TEST(test_optimizer_uses_apply_adam);
    wf_context_free(g_ctx);
    return check_summary();
}
