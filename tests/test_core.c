/* Core: status, dtypes (IEEE half / bfloat16 rounding), tensors, .npy files, the allocation funnel. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
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

/* Every allocation of building and running a small graph is made to fail in turn: each failure
 * must come back as a status (never a crash), leak nothing (ASan build), and leave the objects usable. */
static void test_fault_injection(void)
{
    int failures_seen = 0;
    for (long nth = 1; nth < 400; nth++) {
        wf_context *ctx = NULL;
        wf_graph *g = NULL;
        wf_session *s = NULL;
        wf_tensor *x = NULL, *y = NULL;
        int64_t dims[2] = {2, 3};
        float v[6] = {1, -2, 3, -4, 5, -6};
        wf_output in, r, sum;
        long before = wf__alloc_count();
        wf__fault_inject(nth);
        wf_status *st = wf_context_new(NULL, &ctx);
        if (!st) st = wf_graph_new(&g);
        if (!st) st = wf_placeholder(g, "x", WF_F32, 2, dims, &in);
        if (!st) st = wf_relu(g, "r", in, &r);
        if (!st) st = wf_add(g, "sum", r, in, &sum);
        if (!st) st = wf_session_new(ctx, g, NULL, &s);
        if (!st) st = wf_tensor_new(WF_F32, 2, dims, v, &x);
        if (!st) {
            wf_feed f = {in, x};
            st = wf_session_run(s, &f, 1, &sum, 1, &y, NULL);
        }
        bool fired = wf__alloc_count() - before >= nth;
        wf__fault_inject(0);
        if (st) {
            failures_seen++;
            CHECK_INT(wf_status_code(st), WF_OUT_OF_MEMORY);
            wf_status_free(st);
            /* whatever was built still works once memory is back */
            if (s && x) {
                wf_feed f = {in, x};
                CHECK_OK(wf_session_run(s, &f, 1, &sum, 1, &y, NULL));
            }
        }
        if (y) CHECK(((float *)wf_tensor_data(y))[0] == 2.0f && ((float *)wf_tensor_data(y))[1] == -2.0f);
        wf_tensor_free(y);
        wf_tensor_free(x);
        wf_session_free(s);
        wf_graph_free(g);
        wf_context_free(ctx);
        if (!fired) break; /* every allocation of the sequence has been failed once */
    }
    CHECK(failures_seen > 20);
}

int main(void)
{
    RUN_TEST(test_status);
    RUN_TEST(test_f16);
    RUN_TEST(test_bf16);
    RUN_TEST(test_dtype_names);
    RUN_TEST(test_tensor);
    RUN_TEST(test_npy);
    RUN_TEST(test_fault_injection);
    return check_summary();
}
