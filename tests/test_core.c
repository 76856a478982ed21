/* Core: status, dtypes (IEEE half / bfloat16 rounding), tensors, .npy files, the allocation funnel. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "core/alloc_hooks.h"
#include "core/core.h"

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_status(void)
{
    CHECK_INT(wf_status_code(NULL), WF_OK);
    CHECK(strcmp(wf_status_message(NULL), "") == 0);
    wf_status *s = wf__status(WF_NOT_FOUND, "node '%s' missing", "x");
    CHECK_INT(wf_status_code(s), WF_NOT_FOUND);
    CHECK_STR_CONTAINS(wf_status_message(s), "node 'x' missing");
    s = wf__status_wrap(s, "while planning");
    CHECK_STR_CONTAINS(wf_status_message(s), "while planning: node 'x' missing");
    CHECK(strcmp(wf_code_name(wf_status_code(s)), "NOT_FOUND") == 0);
    wf_status_free(s);
    wf_status_free(NULL);
}

/* Expected bit patterns are from the IEEE 754 binary16 definition, not from this code. */
static void test_f16(void)
{
    CHECK_INT(wf_f32_to_f16(1.0f), 0x3C00);
    CHECK_INT(wf_f32_to_f16(-2.0f), 0xC000);
    CHECK_INT(wf_f32_to_f16(65504.0f), 0x7BFF);              /* largest finite */
    CHECK_INT(wf_f32_to_f16(65520.0f), 0x7C00);              /* rounds to inf */
    CHECK_INT(wf_f32_to_f16(bits_f32(0x33800000)), 0x0001);  /* 2^-24, smallest subnormal */
    CHECK_INT(wf_f32_to_f16(bits_f32(0x33000000)), 0x0000);  /* 2^-25: tie, rounds to even (0) */
    CHECK_INT(wf_f32_to_f16(bits_f32(0x33C00000)), 0x0002);  /* 1.5 * 2^-24: tie, rounds to even (2) */
    CHECK_INT(wf_f32_to_f16(1.0f + 1.0f / 2048), 0x3C00);    /* tie between 1 and 1+2^-10: even */
    CHECK_INT(wf_f32_to_f16(1.0f + 3.0f / 2048), 0x3C02);    /* tie: rounds up to even */
    CHECK_INT(wf_f32_to_f16(bits_f32(0x38800000)), 0x0400);  /* 2^-14, smallest normal */
    CHECK_INT(wf_f32_to_f16(INFINITY), 0x7C00);
    CHECK((wf_f32_to_f16(NAN) & 0x7C00) == 0x7C00 && (wf_f32_to_f16(NAN) & 0x3FF) != 0);
    CHECK(wf_f16_to_f32(0x3C00) == 1.0f);
    CHECK(wf_f16_to_f32(0x0001) == bits_f32(0x33800000));
    CHECK(wf_f16_to_f32(0x7BFF) == 65504.0f);
    CHECK(isinf(wf_f16_to_f32(0xFC00)) && wf_f16_to_f32(0xFC00) < 0);
    /* every half value survives a round trip */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue; /* NaN payloads */
        if (wf_f32_to_f16(wf_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK_INT(bad, 0);
}

static void test_bf16(void)
{
    CHECK_INT(wf_f32_to_bf16(1.0f), 0x3F80);
    CHECK_INT(wf_f32_to_bf16(bits_f32(0x3F808000)), 0x3F80); /* tie: even */
    CHECK_INT(wf_f32_to_bf16(bits_f32(0x3F818000)), 0x3F82); /* tie: up to even */
    CHECK_INT(wf_f32_to_bf16(bits_f32(0x3F808001)), 0x3F81); /* above half */
    CHECK_INT(wf_f32_to_bf16(bits_f32(0x7F7FFFFF)), 0x7F80); /* overflow to inf */
    CHECK(isnan(wf_bf16_to_f32(wf_f32_to_bf16(NAN))));
    CHECK(wf_bf16_to_f32(0xC000) == -2.0f);
}

/* wf__convert's f16/bf16 <-> f32 paths (the vectorised loops of dtype_convert.c, which MatMul, Conv
 * and pooling use for half inputs) agree bit for bit with the scalar converters: every half and
 * bfloat16 pattern to f32, and f32 values around every rounding boundary back (ties, subnormals,
 * overflow, infinities; NaN stays a NaN of the same sign). */
static void test_bulk_half_convert(void)
{
    enum { N = 0x10000, M = 3 * 0x10000 + 8 };
    uint16_t *h = malloc(sizeof *h * M);
    float *f = malloc(sizeof *f * M);
    if (!h || !f) {
        CHECK(h && f);
        free(h);
        free(f);
        return;
    }
    for (int t = 0; t < 2; t++) {
        wf_dtype dt = t ? WF_BF16 : WF_F16;
        for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)i;
        wf__convert(h, dt, f, WF_F32, N);
        int bad = 0;
        for (uint32_t i = 0; i < N; i++) {
            float want = t ? wf_bf16_to_f32((uint16_t)i) : wf_f16_to_f32((uint16_t)i);
            if (memcmp(&want, &f[i], 4) && !(isnan(want) && isnan(f[i]))) bad++;
        }
        CHECK_INT(bad, 0);
        /* each half value, the midpoint above it (a tie) and one ulp of f32 past that */
        int m = 0;
        for (uint32_t i = 0; i < N; i++) {
            uint32_t u;
            memcpy(&u, &f[i], 4);
            f[m++] = f[i];
            uint32_t mid = t ? u + 0x8000u : u + 0x1000u;
            f[m++] = bits_f32(mid);
            f[m++] = bits_f32(mid + 1);
        }
        f[m++] = 65520.0f, f[m++] = -65519.0f, f[m++] = 1e-8f, f[m++] = -3e-8f;
        f[m++] = INFINITY, f[m++] = -INFINITY, f[m++] = NAN, f[m++] = -NAN;
        float *src = malloc(sizeof *src * (size_t)m);
        if (!src) break;
        memcpy(src, f, sizeof *src * (size_t)m);
        wf__convert(src, WF_F32, h, dt, m);
        bad = 0;
        for (int i = 0; i < m; i++) {
            uint16_t want = t ? wf_f32_to_bf16(src[i]) : wf_f32_to_f16(src[i]);
            bool nan_w = t ? (want & 0x7f80) == 0x7f80 && (want & 0x7f) : (want & 0x7c00) == 0x7c00 && (want & 0x3ff);
            bool nan_g = t ? (h[i] & 0x7f80) == 0x7f80 && (h[i] & 0x7f) : (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff);
            if (nan_w ? !nan_g || (want ^ h[i]) & 0x8000 : h[i] != want) bad++;
        }
        CHECK_INT(bad, 0);
        free(src);
    }
    free(h);
    free(f);
}

/* wf__convert's typed loops between the float, small-int and i32/i64 dtypes (dtype.c's convert_typed) give
 * what the element functions give (wf__store_f64 of wf__load_f64): every pair of numeric dtypes over NaN,
 * infinities, signed zeros, a denormal, fractions either side of .5, values past each int type's range (they
 * saturate through int64 and wrap), and int values at their limits. */
static void test_convert_pairs(void)
{
    static const wf_dtype dts[] = {WF_F32, WF_F64, WF_F16, WF_BF16, WF_I8, WF_U8, WF_I16, WF_I32, WF_I64};
    enum { NT = sizeof dts / sizeof dts[0] };
    static const double vals[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-310, 0.5, -0.5, 2.5,
                                  -3.7, 127.5, 128.0, -129.0, 255.5, 256.0, 32767.9, -32769.0, 65504.0, 65520.0,
                                  2147483647.0, -2147483649.0, 4294967296.5, 9.3e18, -9.3e18, 1e30, -1e30, 3e38,
                                  1e300, 123456789.0, -0.0001};
    enum { NV = sizeof vals / sizeof vals[0] };
    int bad = 0;
    for (int a = 0; a < NT; a++) {
        /* the source values as dtype a (through the element function: the same rounding every path sees) */
        char src[NV * 8], got[NV * 8], want[NV * 8];
        for (int i = 0; i < NV; i++) wf__store_f64(src, dts[a], i, vals[i]);
        if (dts[a] == WF_I64) ((int64_t *)src)[0] = INT64_MAX, ((int64_t *)src)[1] = INT64_MIN;
        if (dts[a] == WF_I32) ((int32_t *)src)[0] = INT32_MAX, ((int32_t *)src)[1] = INT32_MIN;
        for (int b = 0; b < NT; b++) {
            wf__convert(src, dts[a], got, dts[b], NV);
            size_t eb = wf_dtype_size(dts[b]);
            for (int i = 0; i < NV; i++) {
                bool ints = !wf__dtype_is_float(dts[a]) && !wf__dtype_is_float(dts[b]);
                if (ints || dts[a] == WF_I64) {
                    /* wf__convert's exact int paths: through int64 */
                    int64_t v = wf__load_i64(src, dts[a], i);
                    if (ints) {
                        int64_t w = v;
                        memcpy(want + i * eb, &w, eb); /* little-endian truncation: the C cast */
                        if (dts[b] == WF_BOOL) want[i * eb] = v != 0;
                    } else {
                        wf__store_f64(want, dts[b], i, (double)v);
                    }
                } else {
                    wf__store_f64(want, dts[b], i, wf__load_f64(src, dts[a], i));
                }
                bool fnan = wf__dtype_is_float(dts[b]) && isnan(wf__load_f64(want, dts[b], i)) &&
                            isnan(wf__load_f64(got, dts[b], i));
                if (memcmp(got + i * eb, want + i * eb, eb) && !fnan && bad++ < 5)
                    fprintf(stderr, "  convert %s -> %s of value %d (%g): got %g, want %g\n", wf_dtype_name(dts[a]),
                            wf_dtype_name(dts[b]), i, vals[i], wf__load_f64(got, dts[b], i),
                            wf__load_f64(want, dts[b], i));
            }
        }
    }
    CHECK_INT(bad, 0);
}

static void test_dtype_names(void)
{
    wf_dtype t;
    CHECK_OK(wf_dtype_from_name("float32", &t));
    CHECK_INT(t, WF_F32);
    CHECK_OK(wf_dtype_from_name("bf16", &t));
    CHECK_INT(t, WF_BF16);
    CHECK_ERR(wf_dtype_from_name("complex64", &t), WF_INVALID_ARGUMENT, "unknown dtype 'complex64'");
    CHECK_INT(wf_dtype_size(WF_I64), 8);
    CHECK_INT(wf_dtype_size(WF_BOOL), 1);
}

static void test_tensor(void)
{
    int64_t dims[2] = {2, 3};
    float v[6] = {1, 2, 3, 4, 5, 6};
    wf_tensor *t, *view;
    CHECK_OK(wf_tensor_new(WF_F32, 2, dims, v, &t));
    CHECK_INT(wf_tensor_size(t), 6);
    CHECK_INT(wf_tensor_bytes(t), 24);
    CHECK(((uintptr_t)wf_tensor_data(t) & 63) == 0);
    CHECK(((float *)wf_tensor_data(t))[5] == 6.0f);
    int64_t vd[1] = {6};
    CHECK_OK(wf__tensor_view(t, 1, vd, &view));
    CHECK(wf_tensor_data(view) == wf_tensor_data(t));
    wf_tensor_free(t); /* the view keeps the data alive */
    CHECK(((float *)wf_tensor_data(view))[2] == 3.0f);
    wf_tensor_free(view);
    int64_t bad[2] = {2, -1};
    CHECK_ERR(wf_tensor_new(WF_F32, 2, bad, NULL, &t), WF_INVALID_ARGUMENT, "negative dim");
    CHECK_ERR(wf_tensor_new(WF_F32, 9, dims, NULL, &t), WF_INVALID_ARGUMENT, "rank 9");
    CHECK_ERR(wf_tensor_new((wf_dtype)42, 0, NULL, NULL, &t), WF_INVALID_ARGUMENT, "invalid dtype");
    int64_t zero[2] = {0, 5};
    CHECK_OK(wf_tensor_new(WF_I64, 2, zero, NULL, &t));
    CHECK_INT(wf_tensor_size(t), 0);
    wf_tensor_free(t);
    CHECK_OK(wf_tensor_new(WF_F64, 0, NULL, NULL, &t));
    CHECK_INT(wf_tensor_size(t), 1);
    wf_tensor_free(t);
}

static char g_tmp[256];

static const char *tmp_file(const char *name, const void *bytes, size_t n)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/weft_test_core_%d_%s", (int)getpid(), name);
    FILE *f = fopen(g_tmp, "wb");
    if (n) fwrite(bytes, 1, n, f);
    fclose(f);
    return g_tmp;
}

/* wf__tensor_view_at: a row of a batch shares the batch's bytes and keeps it alive; a view that would
 * reach outside the base, or over strings, is refused naming the sizes. */
static void test_tensor_view_at(void)
{
    int64_t d[2] = {3, 4}, row = 4, five = 5;
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)i;
    wf_tensor *b = NULL, *r = NULL, *bad = NULL, *s = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, d, v, &b));
    if (!b) return;
    CHECK_OK(wf__tensor_view_at(b, 2 * 4 * sizeof(float), 1, &row, &r));
    if (r) {
        CHECK(wf_tensor_data(r) == (float *)wf_tensor_data(b) + 8);
        CHECK_INT(wf_tensor_size(r), 4);
        CHECK(((float *)wf_tensor_data(r))[3] == 11);
        ((float *)wf_tensor_data(r))[0] = -1; /* the base sees it */
        CHECK(((float *)wf_tensor_data(b))[8] == -1);
    }
    wf_tensor_free(b); /* the view keeps the base's bytes */
    if (r) CHECK(((float *)wf_tensor_data(r))[1] == 9);
    CHECK_ERR(wf__tensor_view_at(r, 0, 1, &five, &bad), WF_INVALID_ARGUMENT, "not inside");
    CHECK_ERR(wf__tensor_view_at(r, sizeof(float), 1, &row, &bad), WF_INVALID_ARGUMENT, "not inside");
    CHECK_ERR(wf__tensor_view_at(r, 1000, 0, NULL, &bad), WF_INVALID_ARGUMENT, "not inside");
    CHECK(bad == NULL);
    const char *strs[2] = {"a", "b"};
    int64_t two = 2;
    CHECK_OK(wf_tensor_new_strings(1, &two, strs, NULL, &s));
    int64_t one = 1;
    if (s) CHECK_ERR(wf__tensor_view_at(s, 0, 1, &one, &bad), WF_INVALID_ARGUMENT, "string");
    wf_tensor_free(s);
    wf_tensor_free(r);
}

static void test_npy(void)
{
    int64_t dims[3] = {2, 1, 3};
    int16_t v[6] = {1, -2, 3, -4, 5, -6};
    wf_tensor *t, *u;
    CHECK_OK(wf_tensor_new(WF_I16, 3, dims, v, &t));
    const char *p = tmp_file("rt.npy", NULL, 0);
    CHECK_OK(wf_npy_write(p, t));
    CHECK_OK(wf_npy_read(p, &u));
    CHECK_INT(wf_tensor_dtype(u), WF_I16);
    CHECK_INT(wf_tensor_rank(u), 3);
    CHECK_INT(wf_tensor_dims(u)[2], 3);
    CHECK(memcmp(wf_tensor_data(u), v, sizeof v) == 0);
    wf_tensor_free(u);
    unlink(p);
    /* scalar */
    wf_tensor *s;
    CHECK_OK(wf_tensor_new(WF_F64, 0, NULL, NULL, &s));
    p = tmp_file("scalar.npy", NULL, 0);
    CHECK_OK(wf_npy_write(p, s));
    CHECK_OK(wf_npy_read(p, &u));
    CHECK_INT(wf_tensor_rank(u), 0);
    wf_tensor_free(u);
    wf_tensor_free(s);
    unlink(p);
    wf_tensor_free(t);

    /* errors name the file and the problem */
    CHECK_ERR(wf_npy_read("/nonexistent/x.npy", &u), WF_NOT_FOUND, "/nonexistent/x.npy");
    p = tmp_file("empty.npy", NULL, 0);
    CHECK_ERR(wf_npy_read(p, &u), WF_INVALID_ARGUMENT, "not a .npy file (empty)");
    unlink(p);
    const char fortran[] = "\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }            \n";
    p = tmp_file("fortran.npy", fortran, sizeof fortran - 1);
    CHECK_ERR(wf_npy_read(p, &u), WF_INVALID_ARGUMENT, "Fortran-order");
    unlink(p);
    const char big[] = "\x93NUMPY\x01\x00\x46\x00{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }              \n";
    p = tmp_file("big.npy", big, sizeof big - 1);
    CHECK_ERR(wf_npy_read(p, &u), WF_INVALID_ARGUMENT, "big-endian");
    unlink(p);
    const char trunc[] = "\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }              \n\x00\x00";
    p = tmp_file("trunc.npy", trunc, sizeof trunc - 1);
    CHECK_ERR(wf_npy_read(p, &u), WF_INVALID_ARGUMENT, "truncated npy data");
    unlink(p);
    const char cplx[] = "\x93NUMPY\x01\x00\x46\x00{'descr': '<c8', 'fortran_order': False, 'shape': (4,), }              \n";
    p = tmp_file("cplx.npy", cplx, sizeof cplx - 1);
    CHECK_ERR(wf_npy_read(p, &u), WF_INVALID_ARGUMENT, "'<c8' is not a weft dtype");
    unlink(p);
}

/* ---- fault injection ------------------------------------------------------------------------------
 * Every host allocation of building and running a graph is made to fail in turn, k = 1, 2, ..., until a
 * run in which fault k is never reached: that run went through the whole allocation sequence. The
 * graph reaches oneDNN (an f32 Conv2D with a bias and a fused Relu on CPU:0, k_dnnl_conv.c) and the
 * test backend plugin (MatMul and Add on TESTDEV:0, tests/plugins/testdev.c, whose host memory and
 * device chunks come from the core's wf_host_api.malloc, so the faults reach it). Each failure must
 * come back as OUT_OF_MEMORY; the objects built so far must then finish building and run to the right
 * answer (the failed step retried on the same context, graph and session); and once everything is
 * freed the funnel must hold exactly the blocks it held before (no leak, in the release build too). */

enum { FI_N = 1, FI_C = 2, FI_H = 6, FI_W = 6, FI_OC = 3, FI_K = 3, FI_OH = 4, FI_OW = 4, FI_J = 4 };
#define FI_ROWS FI_OC
#define FI_COLS (FI_OH * FI_OW)

typedef struct fi_state {
    wf_context *ctx;
    wf_graph *g;
    wf_session *s;
    wf_tensor *x, *y[2];
    wf_output in, wc, bc, conv, relu, flat, w2c, mm, one, sum;
} fi_state;

static float fi_x(int i) { return (float)((i * 5) % 13 - 6) / 4; }
static float fi_w(int i) { return (float)((i * 7) % 11 - 5) / 8; }
static float fi_b(int i) { return (float)(i - 1) / 2; }
static float fi_w2(int i) { return (float)((i * 3) % 7 - 3) / 4; }

static wf_status *fi_const(wf_graph *g, const char *name, int rank, const int64_t *dims, float (*fill)(int),
                           wf_output *out)
{
    wf_tensor *t = NULL;
    wf_status *st = wf_tensor_new(WF_F32, rank, dims, NULL, &t);
    if (!st) {
        for (int64_t i = 0; i < wf_tensor_size(t); i++) ((float *)wf_tensor_data(t))[i] = fill((int)i);
        st = wf_const(g, name, t, out);
    }
    wf_tensor_free(t);
    return st;
}

/* Step i of building and running the graph (0 .. FI_STEPS-1); a step that fails changes nothing, so it
 * can be retried. */
#define FI_STEPS 18
static wf_status *fi_step(fi_state *f, int i)
{
    static const int64_t xd[4] = {FI_N, FI_C, FI_H, FI_W}, wd[4] = {FI_OC, FI_C, FI_K, FI_K}, bd[1] = {FI_OC},
                         fd[2] = {FI_ROWS, FI_COLS}, w2d[2] = {FI_COLS, FI_J};
    static const int64_t strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
    wf_status *st = NULL;
    switch (i) {
    case 0: return wf_context_new(NULL, &f->ctx);
    case 1: return wf_graph_new(&f->g);
    case 2: return wf_graph_set_device(f->g, "CPU:0");
    case 3: return wf_placeholder(f->g, "x", WF_F32, 4, xd, &f->in);
    case 4: return fi_const(f->g, "w", 4, wd, fi_w, &f->wc);
    case 5: return fi_const(f->g, "b", 1, bd, fi_b, &f->bc);
    case 6: {
        wf_output ins[3] = {f->in, f->wc, f->bc};
        wf_attr at[2] = {wf_attr_ints("strides", strides, 2), wf_attr_ints("pads", pads, 4)};
        wf_node *n = NULL;
        st = wf_op(f->g, "Conv2D", "conv", ins, 3, at, 2, &n);
        if (!st) f->conv = wf_out(n, 0);
        return st;
    }
    case 7: return wf_relu(f->g, "relu", f->conv, &f->relu);
    case 8: return wf_reshape(f->g, "flat", f->relu, 2, fd, &f->flat);
    case 9: return wf_graph_set_device(f->g, "TESTDEV:0");
    case 10: return fi_const(f->g, "w2", 2, w2d, fi_w2, &f->w2c);
    case 11: return wf_matmul(f->g, "mm", f->flat, f->w2c, 0, 0, &f->mm);
    case 12: return wf_const_scalar(f->g, "one", WF_F32, 1, &f->one);
    case 13: return wf_add(f->g, "sum", f->mm, f->one, &f->sum);
    case 14: {
        wf_session_options o;
        wf_session_options_init(&o);
        o.strict_placement = 1; /* every node where the graph asks: Conv on CPU:0, MatMul on TESTDEV:0 */
        return wf_session_new(f->ctx, f->g, &o, &f->s);
    }
    case 15:
        if ((st = wf_tensor_new(WF_F32, 4, xd, NULL, &f->x))) return st;
        for (int k = 0; k < FI_N * FI_C * FI_H * FI_W; k++) ((float *)wf_tensor_data(f->x))[k] = fi_x(k);
        return NULL;
    case 16:
    case 17: { /* the second run reuses the plan, its cached oneDNN primitive and the device's memory */
        wf_feed fd1 = {f->in, f->x};
        return wf_session_run(f->s, &fd1, 1, &f->sum, 1, &f->y[i - 16], NULL);
    }
    }
    return NULL;
}

/* The answer worked by hand: a direct convolution, Relu, the MatMul and the + 1. */
static void fi_reference(float *want)
{
    float act[FI_ROWS][FI_COLS];
    for (int oc = 0; oc < FI_OC; oc++)
        for (int oh = 0; oh < FI_OH; oh++)
            for (int ow = 0; ow < FI_OW; ow++) {
                double acc = fi_b(oc);
                for (int c = 0; c < FI_C; c++)
                    for (int kh = 0; kh < FI_K; kh++)
                        for (int kw = 0; kw < FI_K; kw++)
                            acc += (double)fi_w(((oc * FI_C + c) * FI_K + kh) * FI_K + kw) *
                                   fi_x((c * FI_H + oh + kh) * FI_W + ow + kw);
                act[oc][oh * FI_OW + ow] = acc > 0 ? (float)acc : 0;
            }
    for (int r = 0; r < FI_ROWS; r++)
        for (int j = 0; j < FI_J; j++) {
            double acc = 1;
            for (int p = 0; p < FI_COLS; p++) acc += (double)act[r][p] * fi_w2(p * FI_J + j);
            want[r * FI_J + j] = (float)acc;
        }
}

static int fi_matches(const wf_tensor *y, const float *want)
{
    if (!y || wf_tensor_rank(y) != 2 || wf_tensor_dims(y)[0] != FI_ROWS || wf_tensor_dims(y)[1] != FI_J) return 0;
    for (int i = 0; i < FI_ROWS * FI_J; i++)
        if (fabsf(((const float *)wf_tensor_data(y))[i] - want[i]) > 1e-4f * (1 + fabsf(want[i]))) return 0;
    return 1;
}

static void fi_free(fi_state *f)
{
    wf_tensor_free(f->y[0]);
    wf_tensor_free(f->y[1]);
    wf_tensor_free(f->x);
    wf_session_free(f->s);
    wf_graph_free(f->g);
    wf_context_free(f->ctx);
    memset(f, 0, sizeof *f);
    /* the calling thread's tensor block caches hold freed blocks: give them back before counting */
    wf__tensor_cache_flush();
    wf__tensor_large_cache_flush();
}

static void test_fault_injection(void)
{
    float want[FI_ROWS * FI_J];
    fi_reference(want);
    /* unfaulted: the graph runs where it should */
    fi_state f = {0};
    long live0 = (fi_free(&f), wf__alloc_live());
    for (int i = 0; i < FI_STEPS; i++) CHECK_OK(fi_step(&f, i));
    CHECK(fi_matches(f.y[0], want) && fi_matches(f.y[1], want));
    char *text = NULL;
    if (f.s) {
        wf_feed fd = {f.in, f.x};
        CHECK_OK(wf_session_placement(f.s, &fd, 1, &f.sum, 1, &text));
    }
    if (text) {
        CHECK_STR_CONTAINS(text, "conv: (Conv2D+Relu): /job:localhost/replica:0/task:0/device:CPU:0");
        CHECK_STR_CONTAINS(text, "mm: (MatMul): /job:localhost/replica:0/task:0/device:TESTDEV:0");
        CHECK_STR_CONTAINS(text, "sum: (Add): /job:localhost/replica:0/task:0/device:TESTDEV:0");
        wf_free(text);
    }
    fi_free(&f);
    CHECK_INT(wf__alloc_live(), live0);

    long k = 1, failures = 0, absorbed = 0, leaks = 0, wrong = 0, bad_codes = 0;
    const long cap = 200000; /* far above the sequence's length: reaching it is a failure */
    bool reached_end = false;
    for (; k < cap && !reached_end; k++) {
        long fired0 = wf__faults_fired();
        int failed_step = -1;
        wf_status *st = NULL;
        wf__fault_inject(k);
        for (int i = 0; i < FI_STEPS && !st; i++)
            if ((st = fi_step(&f, i))) failed_step = i;
        bool fired = wf__faults_fired() != fired0;
        wf__fault_inject(0);
        if (!fired) {
            /* fault k lies past the last allocation: the whole sequence ran without one */
            reached_end = true;
            CHECK_OK(st);
            st = NULL;
        } else if (st) {
            failures++;
            if (wf_status_code(st) != WF_OUT_OF_MEMORY && bad_codes++ < 5)
                fprintf(stderr, "  fault %ld (step %d): %s: %s\n", k, failed_step, wf_code_name(wf_status_code(st)),
                        wf_status_message(st));
            wf_status_free(st);
            /* what was built still works: retry the failed step, then the rest, on the same objects */
            for (int i = failed_step; i < FI_STEPS; i++) {
                wf_status *e = fi_step(&f, i);
                if (e) {
                    fprintf(stderr, "  fault %ld (step %d): step %d after it: %s\n", k, failed_step, i,
                            wf_status_message(e));
                    wf_status_free(e);
                    wrong++;
                    break;
                }
            }
        } else {
            absorbed++; /* the failure was tolerated (a cache not filled): the answer must still be right */
        }
        if (!fi_matches(f.y[0], want) || !fi_matches(f.y[1], want)) {
            if (wrong++ < 5) fprintf(stderr, "  fault %ld (step %d): wrong or missing output\n", k, failed_step);
        }
        fi_free(&f);
        long live = wf__alloc_live();
        if (live != live0) {
            if (leaks++ < 5) fprintf(stderr, "  fault %ld (step %d): %ld blocks leaked\n", k, failed_step, live - live0);
            live0 = live;
        }
    }
    fprintf(stderr, "  fault injection: %ld allocations, %ld failed with a status, %ld absorbed\n", k - 2, failures,
            absorbed);
    CHECK(reached_end);
    CHECK_INT(bad_codes, 0);
    CHECK_INT(wrong, 0);
    CHECK_INT(leaks, 0);
    CHECK(failures > 0);
}

static int wrap_released_;
static void *wrap_released_ptr_;
static void wrap_release(void *user, void *data)
{
    wrap_released_ += *(int *)user;
    wrap_released_ptr_ = data;
}

/* wf_tensor_wrap: a tensor over the caller's memory (no copy), given back once, when the last
 * reference (views and run outputs that alias it included) goes; refusals leave nothing behind. */
static void test_tensor_wrap(void)
{
    float buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    int one = 1;
    wf_tensor *t = NULL;
    wrap_released_ = 0;
    CHECK_OK(wf_tensor_wrap(WF_F32, 2, dims, buf, wrap_release, &one, &t));
    CHECK(wf_tensor_data(t) == (void *)buf);
    CHECK_INT(wf_tensor_size(t), 6);
    CHECK_INT(wf_tensor_bytes(t), 24);
    /* a run reads it in place and a Reshape's output may alias it: the memory stays lent until both go */
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, y, z;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, dims, &x));
    int64_t flat = 6;
    CHECK_OK(wf_reshape(g, "r", x, 1, &flat, &y));
    CHECK_OK(wf_unary(g, "Neg", "n", x, &z));
    wf_context *ctx = NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_context_new(NULL, &ctx));
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "CPU:0";
    CHECK_OK(wf_session_new(ctx, g, &so, &s));
    wf_feed f = {x, t};
    wf_output fetch[2] = {y, z};
    wf_tensor *out[2] = {NULL, NULL};
    CHECK_OK(wf_session_run(s, &f, 1, fetch, 2, out, NULL));
    if (out[1]) CHECK_NEAR(((float *)wf_tensor_data(out[1]))[5], -6.0, 0);
    if (out[0]) CHECK_NEAR(((float *)wf_tensor_data(out[0]))[4], 5.0, 0);
    wf_tensor_free(t);
    wf_tensor_free(out[1]);
    wf_tensor_free(out[0]);
    CHECK_INT(wrap_released_, 1); /* exactly once, after the last reference */
    CHECK(wrap_released_ptr_ == (void *)buf);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
    /* refusals: misaligned, NULL data with elements, strings; release is not called */
    wrap_released_ = 0;
    t = NULL;
    CHECK_ERR(wf_tensor_wrap(WF_F32, 2, dims, (char *)buf + 1, wrap_release, &one, &t), WF_INVALID_ARGUMENT, "aligned");
    CHECK_ERR(wf_tensor_wrap(WF_F32, 2, dims, NULL, wrap_release, &one, &t), WF_INVALID_ARGUMENT, "NULL");
    CHECK_ERR(wf_tensor_wrap(WF_STRING, 2, dims, buf, wrap_release, &one, &t), WF_INVALID_ARGUMENT, "string");
    int64_t bad[1] = {-3};
    CHECK_ERR(wf_tensor_wrap(WF_F32, 1, bad, buf, wrap_release, &one, &t), WF_INVALID_ARGUMENT, "");
    CHECK(t == NULL);
    CHECK_INT(wrap_released_, 0);
    /* no elements: NULL data is fine; no release function is fine */
    int64_t zero = 0;
    CHECK_OK(wf_tensor_wrap(WF_I64, 1, &zero, NULL, NULL, NULL, &t));
    CHECK_INT(wf_tensor_size(t), 0);
    wf_tensor_free(t);
}

int main(void)
{
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR, 1); /* TESTDEV for the fault injection */
    RUN_TEST(test_status);
    RUN_TEST(test_f16);
    RUN_TEST(test_bf16);
    RUN_TEST(test_bulk_half_convert);
    RUN_TEST(test_convert_pairs);
    RUN_TEST(test_dtype_names);
    RUN_TEST(test_tensor);
    RUN_TEST(test_tensor_wrap);
    RUN_TEST(test_tensor_view_at);
    RUN_TEST(test_npy);
    RUN_TEST(test_fault_injection);
    return check_summary();
}
