/*
 * Checks on the OpenCL device (issue 13): Gather, GatherElements, GatherND, ScatterElements and ScatterND
 * on OPENCL:0 check their indices in a kernel, not by reading them back to the host (the scatters also
 * find duplicate targets there, which then run in index order, the last one winning); so do
 * ReverseSequence (sequence_lens), integer Div and Mod (divisors) and Pow (exponents), the losses
 * (targets), RoiAlign (batch_indices), RotaryEmbedding (position_ids) and RNN, GRU and LSTM (sequence_lens,
 * which their steps then read from device memory) and MaxUnpool (indices); Attention reads its
 * nonpad_kv_seqlen (unchecked, as on the CPU) from device memory. A bad value fails the run with
 * a status that names the node and the op once and the value in the words of the CPU's check (also when
 * the bad output only feeds another kernel, and for index tensors above the old read-back limit of
 * 2^22, which used to be clamped); the next run of the same session with good values gives the values
 * of numpy (worked out by hand below) and those of CPU:0. The whole test runs with
 * WEFT_OCL_NO_READBACK=1, which makes any read-back of a kernel's input fail the run: the good runs
 * passing shows these ops read nothing back. SKIP where there is no OPENCL:0.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static wf_context *ctx;

static bool has_opencl(void)
{
    for (int d = 0; d < wf_context_num_devices(ctx); d++) {
        wf_device_info di;
        if (wf_context_device(ctx, d, &di)) continue;
        if (strstr(di.name, "OPENCL:0")) return true;
    }
    return false;
}

typedef struct op_graph {
    wf_graph *g;
    wf_output x, idx, upd, y;
    const wf_tensor *u; /* the scatters' updates, fed with every run (NULL: a gather) */
    wf_session *dev, *cpu;
} op_graph;

/* op(x, idx[, u]) (then a Relu when relu_after), in a session on OPENCL:0 and one on CPU:0. */
static void op_graph_new_u(op_graph *o, const char *op, const char *name, const wf_tensor *x, const wf_tensor *idx,
                           const wf_tensor *u, const wf_attr *at, int n_at, bool relu_after)
{
    memset(o, 0, sizeof *o);
    o->u = u;
    CHECK_OK(wf_graph_new(&o->g));
    CHECK_OK(wf_placeholder(o->g, "x", wf_tensor_dtype(x), wf_tensor_rank(x), wf_tensor_dims(x), &o->x));
    CHECK_OK(wf_placeholder(o->g, "idx", wf_tensor_dtype(idx), wf_tensor_rank(idx), wf_tensor_dims(idx), &o->idx));
    if (u) CHECK_OK(wf_placeholder(o->g, "u", wf_tensor_dtype(u), wf_tensor_rank(u), wf_tensor_dims(u), &o->upd));
    wf_output in[3] = {o->x, o->idx, o->upd};
    wf_node *n = NULL;
    CHECK_OK(wf_op(o->g, op, name, in, u ? 3 : 2, at, n_at, &n));
    if (!n) return;
    o->y = wf_out(n, 0);
    if (relu_after) CHECK_OK(wf_unary(o->g, "Relu", "after", o->y, &o->y));
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "OPENCL:0";
    so.strict_placement = 1;
    CHECK_OK(wf_session_new(ctx, o->g, &so, &o->dev));
    wf_session_options_init(&so);
    so.device = "CPU:0";
    so.intra_op_threads = 1;
    CHECK_OK(wf_session_new(ctx, o->g, &so, &o->cpu));
}

static void op_graph_new(op_graph *o, const char *op, const char *name, const wf_tensor *x, const wf_tensor *idx,
                         const wf_attr *at, int n_at, bool relu_after)
{
    op_graph_new_u(o, op, name, x, idx, NULL, at, n_at, relu_after);
}

static void op_graph_free(op_graph *o)
{
    wf_session_free(o->dev);
    wf_session_free(o->cpu);
    wf_graph_free(o->g);
}

static wf_status *run(wf_session *s, const op_graph *o, const wf_tensor *x, const wf_tensor *idx, wf_tensor **y)
{
    *y = NULL;
    if (!s) return NULL; /* no session (already a failed check): no output, no error */
    wf_feed f[3] = {{o->x, (wf_tensor *)x}, {o->idx, (wf_tensor *)idx}, {o->upd, (wf_tensor *)o->u}};
    return wf_session_run(s, f, o->u ? 3 : 2, &o->y, 1, y, NULL);
}

/* The error names the node once, at its start ("node 'g' (Gather) on OPENCL:0: " from the executor,
 * or "node 'g' (Gather): " where the plugin names it), and then says want. */
static void expect_error(wf_status *st, const char *node, const char *want)
{
    CHECK(st != NULL);
    if (!st) return;
    CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
    const char *m = wf_status_message(st);
    char on_dev[256], bare[256];
    snprintf(on_dev, sizeof on_dev, "%s on OPENCL:0: %s", node, want);
    snprintf(bare, sizeof bare, "%s: %s", node, want);
    if (strcmp(m, on_dev) != 0 && strcmp(m, bare) != 0)
        CHECK_FAIL_("error '%s' is neither '%s' nor '%s'", m, on_dev, bare);
    wf_status_free(st);
}

/* A good run on OPENCL:0 equals want (n elements of es bytes) and the same run on CPU:0. */
static void expect_bytes(const op_graph *o, const wf_tensor *x, const wf_tensor *idx, const void *want, int64_t n,
                         size_t es)
{
    wf_tensor *y = NULL, *c = NULL;
    CHECK_OK(run(o->dev, o, x, idx, &y));
    CHECK_OK(run(o->cpu, o, x, idx, &c));
    CHECK(y && wf_tensor_size(y) == n);
    CHECK(c && wf_tensor_size(c) == n);
    if (y && c && wf_tensor_size(y) == n && wf_tensor_size(c) == n) {
        CHECK(!memcmp(wf_tensor_data(y), want, es * (size_t)n));
        CHECK(!memcmp(wf_tensor_data(y), wf_tensor_data(c), es * (size_t)n));
    }
    wf_tensor_free(y);
    wf_tensor_free(c);
}

static void expect_values(const op_graph *o, const wf_tensor *x, const wf_tensor *idx, const float *want, int64_t n)
{
    expect_bytes(o, x, idx, want, n, sizeof(float));
}

static wf_tensor *i64(int rank, const int64_t *dims, const int64_t *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, rank, dims, v, &t));
    return t;
}

static void test_gather(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_gather", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[2] = {4, 2}, id[1] = {3};
    float xv[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int64_t bad[3] = {0, 5, 1}, neg[3] = {2, -5, 0}, good[3] = {3, -4, 1};
    wf_tensor *x = NULL, *ib = i64(1, id, bad), *in = i64(1, id, neg), *ig = i64(1, id, good);
    CHECK_OK(wf_tensor_new(WF_F32, 2, xd, xv, &x));
    const float want[6] = {6, 7, 0, 1, 2, 3}; /* numpy: x[[3, -4, 1]] */
    for (int after = 0; after < 2; after++) {
        op_graph o;
        op_graph_new(&o, "Gather", "g", x, ib, NULL, 0, after);
        wf_tensor *y = NULL;
        for (int rep = 0; rep < 3; rep++) {
            /* the error is the Gather's even when only the Relu's output is fetched */
            expect_error(run(o.dev, &o, x, ib, &y), "node 'g' (Gather)",
                         "index 5 (at position 1) is out of range for axis 0 of data [4,2]");
            expect_error(run(o.dev, &o, x, in, &y), "node 'g' (Gather)",
                         "index -5 (at position 1) is out of range for axis 0 of data [4,2]");
            expect_values(&o, x, ig, want, 6); /* the session goes on, the record was reset */
        }
        op_graph_free(&o);
    }
    wf_tensor_free(x);
    wf_tensor_free(ib);
    wf_tensor_free(in);
    wf_tensor_free(ig);
}

/* More indices than the old host check read back (2^22): they used to be clamped, now they fail. */
static void test_gather_many(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_gather_many", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    enum { M = (1 << 22) + 5 };
    int64_t xd[1] = {4}, id[1] = {M};
    float xv[4] = {10, 11, 12, 13};
    int32_t *iv = malloc(sizeof *iv * M);
    float *want = malloc(sizeof *want * M);
    CHECK(iv && want);
    if (!iv || !want) return;
    for (int i = 0; i < M; i++) {
        iv[i] = i % 7 - 3; /* -3..3, all in range of 4 */
        want[i] = xv[iv[i] < 0 ? iv[i] + 4 : iv[i]];
    }
    wf_tensor *x = NULL, *ig = NULL, *ib = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, xd, xv, &x));
    CHECK_OK(wf_tensor_new(WF_I32, 1, id, iv, &ig));
    iv[M - 2] = 4;
    CHECK_OK(wf_tensor_new(WF_I32, 1, id, iv, &ib));
    op_graph o;
    if (x && ig && ib) {
        op_graph_new(&o, "Gather", "big", x, ib, NULL, 0, false);
        wf_tensor *y = NULL;
        expect_error(run(o.dev, &o, x, ib, &y), "node 'big' (Gather)",
                     "index 4 (at position 4194307) is out of range for axis 0 of data [4]");
        expect_values(&o, x, ig, want, M);
        op_graph_free(&o);
    }
    wf_tensor_free(x);
    wf_tensor_free(ig);
    wf_tensor_free(ib);
    free(iv);
    free(want);
}

static void test_gather_elements_and_nd(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_gather_elements_and_nd", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    /* GatherElements on axis 1 of [[0,1,2],[3,4,5]] */
    int64_t ed[2] = {2, 3};
    float ev[6] = {0, 1, 2, 3, 4, 5};
    const int64_t ebad[6] = {0, 1, -7, 2, 2, 2}, egood[6] = {2, -1, 0, 1, 0, -3};
    wf_tensor *ex = NULL, *eb = i64(2, ed, ebad), *eg = i64(2, ed, egood);
    CHECK_OK(wf_tensor_new(WF_F32, 2, ed, ev, &ex));
    wf_attr ax1 = wf_attr_int("axis", 1);
    op_graph o;
    wf_tensor *y = NULL;
    op_graph_new(&o, "GatherElements", "ge", ex, eb, &ax1, 1, false);
    expect_error(run(o.dev, &o, ex, eb, &y), "node 'ge' (GatherElements)",
                 "index -7 (at position 2) is out of range for axis 1 of data [2,3]");
    const float want_e[6] = {2, 2, 0, 4, 3, 3}; /* numpy: np.take_along_axis(x, idx, 1) */
    expect_values(&o, ex, eg, want_e, 6);
    op_graph_free(&o);

    /* GatherND: tuples (row, col) into [2,3] */
    int64_t nd[2] = {2, 2};
    const int64_t nbad[4] = {1, 0, 0, 3}, ngood[4] = {1, 2, -2, -1};
    wf_tensor *nb = i64(2, nd, nbad), *ng = i64(2, nd, ngood);
    op_graph_new(&o, "GatherND", "gn", ex, nb, NULL, 0, true);
    expect_error(run(o.dev, &o, ex, nb, &y), "node 'gn' (GatherND)",
                 "index 3 (tuple 1, entry 1) is out of range for dim 1 of data [2,3]");
    const float want_n[2] = {5, 2}; /* x[1, 2], x[-2, -1] */
    expect_values(&o, ex, ng, want_n, 2);
    op_graph_free(&o);
    wf_tensor *all[] = {ex, eb, eg, nb, ng};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

static wf_tensor *f32(int rank, const int64_t *dims, const float *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, rank, dims, v, &t));
    return t;
}

/* ScatterElements on axis 1 of [[0,1,2],[3,4,5]] with updates [[10,11],[12,13]]: the check and the
 * duplicates decision run on the device, for reduction none (the last index in order wins) and add. */
static void test_scatter_elements(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_scatter_elements", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[2] = {2, 3}, id[2] = {2, 2};
    const float xv[6] = {0, 1, 2, 3, 4, 5}, uv[4] = {10, 11, 12, 13};
    const int64_t bad[4] = {0, 3, 1, 0}, neg[4] = {-4, 0, 1, 2}, distinct[4] = {2, -3, 1, 0}, dup[4] = {1, -2, 0, 0};
    wf_tensor *x = f32(2, xd, xv), *u = f32(2, id, uv), *ib = i64(2, id, bad), *in = i64(2, id, neg),
              *idis = i64(2, id, distinct), *idup = i64(2, id, dup);
    /* numpy: y = x.copy(); for (i, j), v in np.ndenumerate(idx): y[i, v] = u[i, j]   (add: +=) */
    const float want_distinct[6] = {11, 1, 10, 13, 12, 5}, want_dup[6] = {0, 11, 2, 13, 4, 5};
    const float want_add_distinct[6] = {11, 1, 12, 16, 16, 5}, want_add_dup[6] = {0, 22, 2, 28, 4, 5};
    for (int add = 0; add < 2; add++) {
        wf_attr at[2] = {wf_attr_int("axis", 1), wf_attr_string("reduction", "add")};
        op_graph o;
        op_graph_new_u(&o, "ScatterElements", "se", x, ib, u, at, add ? 2 : 1, add);
        wf_tensor *y = NULL;
        for (int rep = 0; rep < 2; rep++) {
            expect_error(run(o.dev, &o, x, ib, &y), "node 'se' (ScatterElements)",
                         "index 3 (at position 1) is out of range for axis 1 of data [2,3]");
            expect_error(run(o.dev, &o, x, in, &y), "node 'se' (ScatterElements)",
                         "index -4 (at position 0) is out of range for axis 1 of data [2,3]");
            expect_values(&o, x, idup, add ? want_add_dup : want_dup, 6);
            expect_values(&o, x, idis, add ? want_add_distinct : want_distinct, 6);
        }
        op_graph_free(&o);
    }
    wf_tensor *all[] = {x, u, ib, in, idis, idup};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* ScatterND into rows of [[0,1],[2,3],[4,5],[6,7]] (updates [[10,11],[12,13],[14,15]]), reduction none
 * and add, then into single elements (tuples of 2, updates [10,11]). */
static void test_scatternd(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_scatternd", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[2] = {4, 2}, id[2] = {3, 1}, ud[2] = {3, 2};
    const float xv[8] = {0, 1, 2, 3, 4, 5, 6, 7}, uv[6] = {10, 11, 12, 13, 14, 15};
    const int64_t bad[3] = {0, 4, 1}, distinct[3] = {3, -4, 1}, dup[3] = {2, 0, -2};
    wf_tensor *x = f32(2, xd, xv), *u = f32(2, ud, uv), *ib = i64(2, id, bad), *idis = i64(2, id, distinct),
              *idup = i64(2, id, dup);
    /* numpy: y = x.copy(); for t, (r,) in enumerate(idx): y[r] = u[t]   (add: +=) */
    const float want_distinct[8] = {12, 13, 14, 15, 4, 5, 10, 11}, want_dup[8] = {12, 13, 2, 3, 14, 15, 6, 7};
    const float want_add_distinct[8] = {12, 14, 16, 18, 4, 5, 16, 18}, want_add_dup[8] = {12, 14, 2, 3, 28, 31, 6, 7};
    for (int add = 0; add < 2; add++) {
        wf_attr at = wf_attr_string("reduction", "add");
        op_graph o;
        op_graph_new_u(&o, "ScatterND", "sn", x, ib, u, &at, add, add);
        wf_tensor *y = NULL;
        for (int rep = 0; rep < 2; rep++) {
            expect_error(run(o.dev, &o, x, ib, &y), "node 'sn' (ScatterND)",
                         "index 4 (tuple 1, entry 0) is out of range for dim 0 of data [4,2]");
            expect_values(&o, x, idup, add ? want_add_dup : want_dup, 8);
            expect_values(&o, x, idis, add ? want_add_distinct : want_distinct, 8);
        }
        op_graph_free(&o);
    }
    /* tuples (row, col): x[1, 0] and x[-3, 0] are one target; the second wins */
    int64_t ed[2] = {2, 2}, eud[1] = {2};
    const float euv[2] = {10, 11};
    const int64_t ebad[4] = {1, 0, 0, 2}, egood[4] = {-1, -1, 1, 0}, edup[4] = {1, 0, -3, 0};
    wf_tensor *eu = f32(1, eud, euv), *eb = i64(2, ed, ebad), *eg = i64(2, ed, egood), *edp = i64(2, ed, edup);
    const float want_e[8] = {0, 1, 11, 3, 4, 5, 6, 10}, want_edup[8] = {0, 1, 11, 3, 4, 5, 6, 7};
    op_graph o;
    op_graph_new_u(&o, "ScatterND", "sn2", x, eb, eu, NULL, 0, true);
    wf_tensor *y = NULL;
    expect_error(run(o.dev, &o, x, eb, &y), "node 'sn2' (ScatterND)",
                 "index 2 (tuple 1, entry 1) is out of range for dim 1 of data [4,2]");
    expect_values(&o, x, eg, want_e, 8);
    expect_values(&o, x, edp, want_edup, 8);
    op_graph_free(&o);
    wf_tensor *all[] = {x, u, ib, idis, idup, eu, eb, eg, edp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* ReverseSequence of [[0,1,2],[3,4,5]] (batch axis 0, time axis 1): its lengths are checked on the device. */
static void test_reverse_sequence(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_reverse_sequence", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[2] = {2, 3}, ld[1] = {2};
    const float xv[6] = {0, 1, 2, 3, 4, 5};
    const int64_t bad[2] = {2, 4}, neg[2] = {-1, 0}, good[2] = {3, 2};
    wf_tensor *x = f32(2, xd, xv), *lb = i64(1, ld, bad), *ln = i64(1, ld, neg), *lg = i64(1, ld, good);
    /* numpy: y = x.copy(); y[b, :n] = x[b, :n][::-1] for each batch b with length n */
    const float want[6] = {2, 1, 0, 4, 3, 5};
    wf_attr at[2] = {wf_attr_int("batch_axis", 0), wf_attr_int("time_axis", 1)};
    for (int after = 0; after < 2; after++) {
        op_graph o;
        op_graph_new(&o, "ReverseSequence", "rs", x, lb, at, 2, after);
        wf_tensor *y = NULL;
        for (int rep = 0; rep < 2; rep++) {
            expect_error(run(o.dev, &o, x, lb, &y), "node 'rs' (ReverseSequence)",
                         "sequence length 4 of batch 1 is outside [0, 3] for input [2,3]");
            expect_error(run(o.dev, &o, x, ln, &y), "node 'rs' (ReverseSequence)",
                         "sequence length -1 of batch 0 is outside [0, 3] for input [2,3]");
            expect_values(&o, x, lg, want, 6);
        }
        op_graph_free(&o);
    }
    wf_tensor *all[] = {x, lb, ln, lg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* Integer Div, Mod and Pow check their divisors / exponents on the device (the values are numpy's). */
static void test_int_divisors(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_int_divisors", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t d4[1] = {4}, d22[2] = {2, 2}, d2[1] = {2};
    const int32_t a32[4] = {7, -7, 9, 5}, bad32[4] = {2, 0, 3, 1}, good32[4] = {2, -2, 4, -1};
    const int32_t want_div[4] = {3, 3, 2, -5}; /* exact in both truncating and floor division */
    wf_tensor *a = NULL, *bb = NULL, *bg = NULL;
    CHECK_OK(wf_tensor_new(WF_I32, 1, d4, a32, &a));
    CHECK_OK(wf_tensor_new(WF_I32, 1, d4, bad32, &bb));
    CHECK_OK(wf_tensor_new(WF_I32, 1, d4, good32, &bg));
    op_graph o;
    wf_tensor *y = NULL;
    op_graph_new(&o, "Div", "dv", a, bb, NULL, 0, false);
    for (int rep = 0; rep < 2; rep++) {
        expect_error(run(o.dev, &o, a, bb, &y), "node 'dv' (Div)", "integer division by zero (i32 divisor, element 1)");
        expect_bytes(&o, a, bg, want_div, 4, sizeof(int32_t));
    }
    op_graph_free(&o);

    /* Mod (numpy.mod: the divisor's sign) of i64 [[7,-7],[9,5]] by a broadcast row */
    const int64_t a64[4] = {7, -7, 9, 5}, mbad[2] = {3, 0}, mgood[2] = {3, -4};
    const int64_t want_mod[4] = {1, -3, 0, -3};
    wf_tensor *ma = i64(2, d22, a64), *mb = i64(1, d2, mbad), *mg = i64(1, d2, mgood);
    op_graph_new(&o, "Mod", "md", ma, mb, NULL, 0, false);
    expect_error(run(o.dev, &o, ma, mb, &y), "node 'md' (Mod)", "integer division by zero (i64 divisor, element 1)");
    expect_bytes(&o, ma, mg, want_mod, 4, sizeof(int64_t));
    op_graph_free(&o);

    /* Pow of i32 [2,3,-2,5]: a negative exponent fails, as numpy raises */
    const int32_t p32[4] = {2, 3, -2, 5}, ebad[4] = {1, -3, 2, 0}, egood[4] = {3, 2, 3, 0};
    const int32_t want_pow[4] = {8, 9, -8, 1};
    wf_tensor *pa = NULL, *pb = NULL, *pg = NULL;
    CHECK_OK(wf_tensor_new(WF_I32, 1, d4, p32, &pa));
    CHECK_OK(wf_tensor_new(WF_I32, 1, d4, ebad, &pb));
    CHECK_OK(wf_tensor_new(WF_I32, 1, d4, egood, &pg));
    op_graph_new(&o, "Pow", "pw", pa, pb, NULL, 0, false);
    expect_error(run(o.dev, &o, pa, pb, &y), "node 'pw' (Pow)",
                 "integers to negative integer powers are not allowed (exponent -3 at element 1)");
    expect_bytes(&o, pa, pg, want_pow, 4, sizeof(int32_t));
    op_graph_free(&o);
    wf_tensor *all[] = {a, bb, bg, ma, mb, mg, pa, pb, pg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* The losses check their targets on the device: NegativeLogLikelihoodLoss over log-probabilities
 * [[-1,-2,-3],[-4,-5,-6]] (reduction none, ignore_index -100), SoftmaxCrossEntropyLoss over zeros. */
static void test_loss_targets(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_loss_targets", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[2] = {2, 3}, td[1] = {2};
    const float xv[6] = {-1, -2, -3, -4, -5, -6}, zv[6] = {0};
    const int64_t over[2] = {1, 3}, under[2] = {-2, 0}, ign[2] = {1, -100}, good[2] = {2, 0};
    wf_tensor *x = f32(2, xd, xv), *z = f32(2, xd, zv), *to = i64(1, td, over), *tu = i64(1, td, under),
              *ti = i64(1, td, ign), *tg = i64(1, td, good);
    wf_attr at[2] = {wf_attr_string("reduction", "none"), wf_attr_int("ignore_index", -100)};
    op_graph o;
    wf_tensor *y = NULL;
    op_graph_new(&o, "NegativeLogLikelihoodLoss", "nll", x, to, at, 2, false);
    for (int rep = 0; rep < 2; rep++) {
        expect_error(run(o.dev, &o, x, to, &y), "node 'nll' (NegativeLogLikelihoodLoss)",
                     "target 3 at position 1 is not a class in [0, 3) nor ignore_index");
        expect_error(run(o.dev, &o, x, tu, &y), "node 'nll' (NegativeLogLikelihoodLoss)",
                     "target -2 at position 0 is not a class in [0, 3) nor ignore_index");
        const float want_i[2] = {2, 0}, want_g[2] = {3, 4}; /* -x[i, t[i]], 0 where ignored */
        expect_values(&o, x, ti, want_i, 2);
        expect_values(&o, x, tg, want_g, 2);
    }
    op_graph_free(&o);

    /* mean over both rows of -log(softmax(0, 0, 0)) = log 3; the bad target has no ignore_index */
    op_graph_new(&o, "SoftmaxCrossEntropyLoss", "sce", z, ti, NULL, 0, false);
    expect_error(run(o.dev, &o, z, ti, &y), "node 'sce' (SoftmaxCrossEntropyLoss)",
                 "target -100 at position 1 is not a class in [0, 3) nor ignore_index");
    CHECK_OK(run(o.dev, &o, z, tg, &y));
    CHECK(y && wf_tensor_size(y) == 1);
    if (y && wf_tensor_size(y) == 1) CHECK(fabs(((const float *)wf_tensor_data(y))[0] - log(3.0)) < 1e-6);
    wf_tensor_free(y);
    op_graph_free(&o);
    wf_tensor *all[] = {x, z, to, tu, ti, tg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* op(in[0..n-1]) in a session on OPENCL:0 and one on CPU:0; every run feeds all n inputs (a NULL one is an
 * absent optional input). */
typedef struct multi_graph {
    wf_graph *g;
    wf_output in[8], y;
    int n;
    wf_session *dev, *cpu;
} multi_graph;

static void multi_new(multi_graph *m, const char *op, const char *name, wf_tensor *const *in, int n, const wf_attr *at,
                      int n_at)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    CHECK_OK(wf_graph_new(&m->g));
    for (int i = 0; i < n; i++) {
        if (!in[i]) continue;
        char pn[8];
        snprintf(pn, sizeof pn, "in%d", i);
        CHECK_OK(wf_placeholder(m->g, pn, wf_tensor_dtype(in[i]), wf_tensor_rank(in[i]), wf_tensor_dims(in[i]), &m->in[i]));
    }
    wf_node *nd = NULL;
    CHECK_OK(wf_op(m->g, op, name, m->in, n, at, n_at, &nd));
    if (!nd) return;
    m->y = wf_out(nd, 0);
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "OPENCL:0";
    so.strict_placement = 1;
    CHECK_OK(wf_session_new(ctx, m->g, &so, &m->dev));
    wf_session_options_init(&so);
    so.device = "CPU:0";
    so.intra_op_threads = 1;
    CHECK_OK(wf_session_new(ctx, m->g, &so, &m->cpu));
}

static wf_status *multi_run(wf_session *s, const multi_graph *m, wf_tensor *const *in, wf_tensor **y)
{
    *y = NULL;
    if (!s) return NULL;
    wf_feed f[8];
    int nf = 0;
    for (int i = 0; i < m->n; i++)
        if (in[i]) f[nf++] = (wf_feed){m->in[i], in[i]};
    return wf_session_run(s, f, nf, &m->y, 1, y, NULL);
}

/* A good run on OPENCL:0 equals want (n floats) and the same run on CPU:0. */
static void multi_expect(const multi_graph *m, wf_tensor *const *in, const float *want, int64_t n)
{
    wf_tensor *y = NULL, *c = NULL;
    CHECK_OK(multi_run(m->dev, m, in, &y));
    CHECK_OK(multi_run(m->cpu, m, in, &c));
    CHECK(y && wf_tensor_size(y) == n && c && wf_tensor_size(c) == n);
    if (y && c && wf_tensor_size(y) == n && wf_tensor_size(c) == n) {
        CHECK(!memcmp(wf_tensor_data(y), want, sizeof(float) * (size_t)n));
        CHECK(!memcmp(wf_tensor_data(y), wf_tensor_data(c), sizeof(float) * (size_t)n));
    }
    wf_tensor_free(y);
    wf_tensor_free(c);
}

static void multi_free(multi_graph *m)
{
    wf_session_free(m->dev);
    wf_session_free(m->cpu);
    wf_graph_free(m->g);
}

/* RoiAlign over X [2,1,2,2] (batch 0 all 1, batch 1 all 7) with two whole-image rois and 1x1 outputs:
 * each output is its batch's constant (half_pixel: the one sample is at (0, 0)). */
static void test_roi_align(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_roi_align", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[4] = {2, 1, 2, 2}, rd[2] = {2, 4}, bd[1] = {2};
    const float xv[8] = {1, 1, 1, 1, 7, 7, 7, 7}, rv[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    const int64_t over[2] = {0, 2}, under[2] = {-1, 0}, good[2] = {1, 0};
    wf_tensor *x = f32(4, xd, xv), *r = f32(2, rd, rv), *bo = i64(1, bd, over), *bu = i64(1, bd, under),
              *bg = i64(1, bd, good);
    wf_attr at[4] = {wf_attr_int("output_height", 1), wf_attr_int("output_width", 1), wf_attr_int("sampling_ratio", 1),
                     wf_attr_string("coordinate_transformation_mode", "half_pixel")};
    wf_tensor *in_o[3] = {x, r, bo}, *in_u[3] = {x, r, bu}, *in_g[3] = {x, r, bg};
    multi_graph m;
    wf_tensor *y = NULL;
    multi_new(&m, "RoiAlign", "ra", in_o, 3, at, 4);
    for (int rep = 0; rep < 2; rep++) {
        expect_error(multi_run(m.dev, &m, in_o, &y), "node 'ra' (RoiAlign)", "batch_indices[1] = 2 is outside [0, 2)");
        expect_error(multi_run(m.dev, &m, in_u, &y), "node 'ra' (RoiAlign)", "batch_indices[0] = -1 is outside [0, 2)");
        const float want[2] = {7, 1};
        multi_expect(&m, in_g, want, 2);
    }
    multi_free(&m);
    wf_tensor *all[] = {x, r, bo, bu, bg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* RotaryEmbedding of x [1,1,2,2] = [[1,2],[3,4]] with caches of 3 positions (cos, sin): (1, 0), (0, 1),
 * (-1, 0); y = (c x1 - s x2, s x1 + c x2) at each position's row. */
static void test_rotary_positions(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_rotary_positions", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[4] = {1, 1, 2, 2}, cd[2] = {3, 1}, pd[2] = {1, 2};
    const float xv[4] = {1, 2, 3, 4}, cv[3] = {1, 0, -1}, sv[3] = {0, 1, 0};
    const int64_t over[2] = {0, 3}, under[2] = {-1, 0}, good[2] = {2, 1};
    const int32_t good32[2] = {1, 0};
    wf_tensor *x = f32(4, xd, xv), *c = f32(2, cd, cv), *sn = f32(2, cd, sv), *po = i64(2, pd, over),
              *pu = i64(2, pd, under), *pg = i64(2, pd, good), *pg32 = NULL;
    CHECK_OK(wf_tensor_new(WF_I32, 2, pd, good32, &pg32));
    wf_tensor *in_o[4] = {x, c, sn, po}, *in_u[4] = {x, c, sn, pu}, *in_g[4] = {x, c, sn, pg}, *in_32[4] = {x, c, sn, pg32};
    multi_graph m;
    wf_tensor *y = NULL;
    multi_new(&m, "RotaryEmbedding", "rope", in_o, 4, NULL, 0);
    for (int rep = 0; rep < 2; rep++) {
        expect_error(multi_run(m.dev, &m, in_o, &y), "node 'rope' (RotaryEmbedding)",
                     "position id 3 is outside the caches' 3 positions");
        expect_error(multi_run(m.dev, &m, in_u, &y), "node 'rope' (RotaryEmbedding)",
                     "position id -1 is outside the caches' 3 positions");
        const float want[4] = {-1, -2, -4, 3}; /* rows 2 and 1 */
        multi_expect(&m, in_g, want, 4);
    }
    multi_free(&m);
    multi_new(&m, "RotaryEmbedding", "rope32", in_32, 4, NULL, 0);
    const float want32[4] = {-2, 1, 3, 4}; /* rows 1 and 0 */
    multi_expect(&m, in_32, want32, 4);
    multi_free(&m);
    wf_tensor *all[] = {x, c, sn, po, pu, pg, pg32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* RNN, GRU and LSTM check sequence_lens on the device and their steps read the lengths from device memory.
 * RNN with Relu, W = R = 1, no bias: h_t = relu(x_t + h_{t-1}). X (seq 3, batch 2, 1 input) is [1, 2, 3]
 * for batch 0 and [4, 5, 6] for batch 1 (layout 0: flat [1, 4, 2, 5, 3, 6]); lengths (3, 1) give
 * Y[t][0][b][0] = (1, 4), (3, 0), (6, 0), zeros past batch 1's length; (2, 3) as i32 give (1, 4), (3, 9),
 * (0, 15). GRU and LSTM (zero weights) check the same lengths in the same words. */
static void test_rnn_lengths(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_rnn_lengths", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[3] = {3, 2, 1}, wd[3] = {1, 1, 1}, ld[1] = {2};
    const float xv[6] = {1, 4, 2, 5, 3, 6}, one[1] = {1};
    const int64_t over[2] = {3, 4}, under[2] = {-1, 0}, good[2] = {3, 1};
    const int32_t good32[2] = {2, 3}, over32[2] = {0, 7};
    wf_tensor *x = f32(3, xd, xv), *w = f32(3, wd, one), *r = f32(3, wd, one), *lo = i64(1, ld, over),
              *lu = i64(1, ld, under), *lg = i64(1, ld, good), *lg32 = NULL, *lo32 = NULL;
    CHECK_OK(wf_tensor_new(WF_I32, 1, ld, good32, &lg32));
    CHECK_OK(wf_tensor_new(WF_I32, 1, ld, over32, &lo32));
    wf_tensor *in_o[5] = {x, w, r, NULL, lo}, *in_u[5] = {x, w, r, NULL, lu}, *in_g[5] = {x, w, r, NULL, lg};
    wf_tensor *in_o32[5] = {x, w, r, NULL, lo32}, *in_g32[5] = {x, w, r, NULL, lg32};
    wf_attr at[2] = {wf_attr_int("hidden_size", 1), wf_attr_string("activations", "Relu")};
    multi_graph m;
    wf_tensor *y = NULL;
    multi_new(&m, "RNN", "rnn", in_o, 5, at, 2);
    for (int rep = 0; rep < 2; rep++) {
        expect_error(multi_run(m.dev, &m, in_o, &y), "node 'rnn' (RNN)", "sequence_lens[1] = 4 is outside [0, 3]");
        expect_error(multi_run(m.dev, &m, in_u, &y), "node 'rnn' (RNN)", "sequence_lens[0] = -1 is outside [0, 3]");
        const float want[6] = {1, 4, 3, 0, 6, 0};
        multi_expect(&m, in_g, want, 6);
    }
    multi_free(&m);
    multi_new(&m, "RNN", "rnn32", in_o32, 5, at, 2);
    expect_error(multi_run(m.dev, &m, in_o32, &y), "node 'rnn32' (RNN)", "sequence_lens[1] = 7 is outside [0, 3]");
    const float want32[6] = {1, 4, 3, 9, 0, 15};
    multi_expect(&m, in_g32, want32, 6);
    multi_free(&m);
    /* GRU (3 gates) and LSTM (4 gates) with zero weights: the same check; a good run gives Y = 0 */
    const float zeros[4] = {0};
    int64_t gd[3] = {1, 3, 1}, ldd[3] = {1, 4, 1};
    wf_tensor *gw = f32(3, gd, zeros), *lw = f32(3, ldd, zeros);
    const char *ops[2] = {"GRU", "LSTM"};
    for (int i = 0; i < 2; i++) {
        wf_tensor *wt = i ? lw : gw;
        wf_tensor *go[5] = {x, wt, wt, NULL, lo}, *gg[5] = {x, wt, wt, NULL, lg};
        char want_node[32];
        snprintf(want_node, sizeof want_node, "node 'g%d' (%s)", i, ops[i]);
        char name[8];
        snprintf(name, sizeof name, "g%d", i);
        multi_new(&m, ops[i], name, go, 5, at, 1);
        expect_error(multi_run(m.dev, &m, go, &y), want_node, "sequence_lens[1] = 4 is outside [0, 3]");
        const float want0[6] = {0};
        multi_expect(&m, gg, want0, 6);
        multi_free(&m);
    }
    wf_tensor *all[] = {x, w, r, lo, lu, lg, lg32, lo32, gw, lw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* MaxUnpool of X [1,1,2,2] = [1, 2, 3, 4] (kernel and strides 2x2: a 4x4 output of 16 elements) checks its
 * indices on the device and reads them from device memory: indices (0, 3, 8, 15) put 1, 2, 3, 4 there and
 * zeros elsewhere; i32 (5, 6, 9, 10) put them in the middle 2x2. */
static void test_max_unpool(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_max_unpool", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t xd[4] = {1, 1, 2, 2}, two[2] = {2, 2};
    const float xv[4] = {1, 2, 3, 4};
    const int64_t over[4] = {0, 3, 8, 16}, under[4] = {0, -1, 8, 15}, good[4] = {0, 3, 8, 15};
    const int32_t good32[4] = {5, 6, 9, 10}, over32[4] = {5, 6, 9, 99};
    wf_tensor *x = f32(4, xd, xv), *io = i64(4, xd, over), *iu = i64(4, xd, under), *ig = i64(4, xd, good),
              *ig32 = NULL, *io32 = NULL;
    CHECK_OK(wf_tensor_new(WF_I32, 4, xd, good32, &ig32));
    CHECK_OK(wf_tensor_new(WF_I32, 4, xd, over32, &io32));
    wf_attr at[2] = {wf_attr_ints("kernel_shape", two, 2), wf_attr_ints("strides", two, 2)};
    wf_tensor *y = NULL;
    op_graph o;
    op_graph_new(&o, "MaxUnpool", "up", x, io, at, 2, false);
    for (int rep = 0; rep < 2; rep++) {
        expect_error(run(o.dev, &o, x, io, &y), "node 'up' (MaxUnpool)",
                     "index 16 is outside the 16 unpooled elements");
        expect_error(run(o.dev, &o, x, iu, &y), "node 'up' (MaxUnpool)",
                     "index -1 is outside the 16 unpooled elements");
        const float want[16] = {1, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 4};
        expect_values(&o, x, ig, want, 16);
    }
    op_graph_free(&o);
    op_graph_new(&o, "MaxUnpool", "up32", x, io32, at, 2, true);
    expect_error(run(o.dev, &o, x, io32, &y), "node 'up32' (MaxUnpool)",
                 "index 99 is outside the 16 unpooled elements");
    const float want32[16] = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0};
    expect_values(&o, x, ig32, want32, 16);
    op_graph_free(&o);
    wf_tensor *all[] = {x, io, iu, ig, ig32, io32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* Attention reads nonpad_kv_seqlen from device memory (its values are used as they are, on the CPU too: no
 * check). Q = 0 (B 2, 1 head, 1 query, head size 1) scores every key 0, so each row averages the first
 * nonpad values of V: V = (1, 2, 3) for batch 0 and (4, 5, 6) for batch 1; lengths (2, 1) give (1.5, 4),
 * then (1, 2) in the same session give (1, 4.5). */
static void test_attention_nonpad(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_attention_nonpad", "no OPENCL:0 device (the OpenCL plugin found none)");
        return;
    }
    int64_t qd[4] = {2, 1, 1, 1}, kd[4] = {2, 1, 3, 1}, nd[1] = {2};
    const float qv[2] = {0, 0}, kv[6] = {1, -2, 3, 0.5f, 7, -1}, vv[6] = {1, 2, 3, 4, 5, 6};
    const int64_t lens[2] = {2, 1};
    const int64_t lens2[2] = {1, 2};
    wf_tensor *q = f32(4, qd, qv), *kt = f32(4, kd, kv), *v = f32(4, kd, vv), *l = i64(1, nd, lens),
              *l2 = i64(1, nd, lens2);
    wf_tensor *in[7] = {q, kt, v, NULL, NULL, NULL, l}, *in2[7] = {q, kt, v, NULL, NULL, NULL, l2};
    multi_graph m;
    multi_new(&m, "Attention", "attn", in, 7, NULL, 0);
    const float want[2] = {1.5f, 4}, want2[2] = {1, 4.5f};
    for (int rep = 0; rep < 2; rep++) {
        multi_expect(&m, in, want, 2);
        multi_expect(&m, in2, want2, 2);
    }
    multi_free(&m);
    wf_tensor *all[] = {q, kt, v, l, l2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

int main(void)
{
    /* any read-back of a kernel's input fails (the plugin reads this when it opens the device) */
    setenv("WEFT_OCL_NO_READBACK", "1", 1);
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR "/../..", 1);
    CHECK_OK(wf_context_new(NULL, &ctx));
    if (!ctx) return 1;
    RUN_TEST(test_gather);
    RUN_TEST(test_gather_many);
    RUN_TEST(test_gather_elements_and_nd);
    RUN_TEST(test_scatter_elements);
    RUN_TEST(test_scatternd);
    RUN_TEST(test_reverse_sequence);
    RUN_TEST(test_int_divisors);
    RUN_TEST(test_loss_targets);
    RUN_TEST(test_roi_align);
    RUN_TEST(test_rotary_positions);
    RUN_TEST(test_rnn_lengths);
    RUN_TEST(test_max_unpool);
    RUN_TEST(test_attention_nonpad);
    wf_context_free(ctx);
    return check_summary();
}
