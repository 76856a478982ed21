/*
 * The mixed-precision pass (src/passes/amp.c) on hand-made graphs: which nodes convert, the casts it
 * inserts (one per value, only at boundaries), cancelled cast pairs, deny-listed and unlisted ops kept
 * in f32, the device's say (a device without native 16-bit compute keeps every allow-list op in f32),
 * the list edits and their errors, and values: the same program with the pass on and off agreeing
 * within bf16/f16 tolerance, NaN and Inf included, for a forward graph and for its gradients.
 *
 * The pass asks its device question through wf__opt_options.amp_device. Tests that check the graph it
 * builds call wf__optimize with a device of their own (always native, or never), so they hold on every
 * CPU; the optimised graph then runs in a plain session (bf16 and f16 kernels exist on every CPU,
 * converted through f32 where the CPU has no native form). Tests through a real session check what
 * this CPU says.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "passes/passes.h"

static wf_context *ctx;

static int native_calls;
/* A device that computes every 16-bit dtype natively and has every kernel. */
static bool dev_native(void *arg, const wf_node *n, const wf__tinfo *in, const wf__tinfo *out, bool need_fast,
                       char *why, size_t cap)
{
    (void)arg, (void)n, (void)in, (void)out, (void)need_fast;
    native_calls++;
    snprintf(why, cap, "TEST:0");
    return true;
}

/* A device with kernels but no native 16-bit compute. */
static bool dev_slow(void *arg, const wf_node *n, const wf__tinfo *in, const wf__tinfo *out, bool need_fast,
                     char *why, size_t cap)
{
    (void)arg, (void)n, (void)in, (void)out;
    snprintf(why, cap, "TEST:0 does not compute it natively");
    return !need_fast;
}

/* fold's evaluator, as the session gives it: the one-node graph run on the CPU. */
static wf_status *eval_cpu(void *arg, wf_graph *g, const wf_output *outputs, int n, wf_tensor **values)
{
    (void)arg;
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "CPU:0";
    so.opt_level = 0;
    wf_session *e = NULL;
    wf_status *st = wf_session_new(ctx, g, &so, &e);
    if (!st) st = wf_session_run(e, NULL, 0, outputs, n, values, NULL);
    wf_session_free(e);
    return st;
}

static wf__optimized *amp_optimize(wf_graph *g, const wf_output *roots, int nr, const wf_output *keep, int nk,
                                   wf_dtype lo, int level, const char *lists,
                                   bool (*dev)(void *, const wf_node *, const wf__tinfo *, const wf__tinfo *, bool,
                                               char *, size_t))
{
    wf__opt_options o = {.level = level, .amp = lo, .amp_lists = lists, .amp_device = dev, .eval = eval_cpu};
    wf__optimized *r = NULL;
    CHECK_OK(wf__optimize(g, roots, nr, keep, nk, &o, &r));
    return r;
}

static int count_op(const wf__optimized *o, const char *op)
{
    int n = 0;
    for (int i = 0; i < o->g->n; i++) n += !strcmp(o->g->nodes[i]->op->name, op);
    return n;
}

/* Casts of the optimised graph to dtype `to`. */
static int count_casts(const wf__optimized *o, wf_dtype to)
{
    int n = 0;
    for (int i = 0; i < o->g->n; i++) {
        const wf_node *x = o->g->nodes[i];
        n += !strcmp(x->op->name, "Cast") && x->out[0].dtype == to;
    }
    return n;
}

static wf_dtype dtype_of(const wf__optimized *o, const char *name)
{
    const wf_node *n = wf__graph_lookup(o->g, name);
    return n ? n->out[0].dtype : WF_DTYPE_INVALID;
}

static wf_output konst(wf_graph *g, const char *name, int rank, const int64_t *dims, const float *v)
{
    wf_tensor *t = NULL;
    wf_output o = {NULL, 0};
    CHECK_OK(wf_tensor_new(WF_F32, rank, dims, v, &t));
    if (t) CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

static wf_output op(wf_graph *g, const char *name_op, const char *name, const wf_output *in, int n_in)
{
    wf_node *n = NULL;
    CHECK_OK(wf_op(g, name_op, name, in, n_in, NULL, 0, &n));
    return (wf_output){n, 0};
}

static void fill(float *v, int64_t n, unsigned seed, float scale)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = scale * ((float)(seed >> 8) / 16777216.0f * 2 - 1);
    }
}

/* x[8,16] @ W1[16,32] + b -> Relu -> @ W2[32,8] -> Exp (deny) -> @ W3[8,4] -> Softmax (deny) */
typedef struct mlp {
    wf_graph *g;
    wf_output x, h1, b1, r1, h2, e, h3, sm;
} mlp;

static void build_mlp(mlp *m)
{
    static float w1[16 * 32], b[32], w2[32 * 8], w3[8 * 4];
    fill(w1, 16 * 32, 1, 0.3f);
    fill(b, 32, 2, 0.1f);
    fill(w2, 32 * 8, 3, 0.2f);
    fill(w3, 8 * 4, 4, 0.5f);
    CHECK_OK(wf_graph_new(&m->g));
    wf_graph *g = m->g;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, (int64_t[]){8, 16}, &m->x));
    wf_output W1 = konst(g, "W1", 2, (int64_t[]){16, 32}, w1), B = konst(g, "b", 1, (int64_t[]){32}, b);
    wf_output W2 = konst(g, "W2", 2, (int64_t[]){32, 8}, w2), W3 = konst(g, "W3", 2, (int64_t[]){8, 4}, w3);
    m->h1 = op(g, "MatMul", "h1", (wf_output[]){m->x, W1}, 2);
    m->b1 = op(g, "Add", "b1", (wf_output[]){m->h1, B}, 2);
    m->r1 = op(g, "Relu", "r1", &m->b1, 1);
    m->h2 = op(g, "MatMul", "h2", (wf_output[]){m->r1, W2}, 2);
    m->e = op(g, "Exp", "e", &m->h2, 1);
    m->h3 = op(g, "MatMul", "h3", (wf_output[]){m->e, W3}, 2);
    CHECK_OK(wf_softmax(g, "sm", m->h3, -1, &m->sm));
}

/* The nodes it converts and the casts it inserts, at level 0 (no folding: the weights' casts stay). */
static void test_casts_inserted(void)
{
    mlp m;
    build_mlp(&m);
    if (!m.g) return;
    wf__optimized *o = amp_optimize(m.g, &m.sm, 1, &m.x, 1, WF_BF16, 0, NULL, dev_native);
    if (o) {
        CHECK_INT(dtype_of(o, "h1"), WF_BF16);
        CHECK_INT(dtype_of(o, "b1"), WF_BF16); /* infer: h1 is bf16, b a constant */
        CHECK_INT(dtype_of(o, "r1"), WF_BF16); /* clear */
        CHECK_INT(dtype_of(o, "h2"), WF_BF16); /* reads r1 directly: no cast pair between them */
        CHECK_INT(dtype_of(o, "e"), WF_F32);   /* deny */
        CHECK_INT(dtype_of(o, "h3"), WF_BF16); /* allow again, after a cast of e */
        CHECK_INT(dtype_of(o, "sm"), WF_F32);  /* deny */
        /* to bf16: x, W1, b, W2, e, W3 (one each); to f32: after h2 (for e) and after h3 (for sm) */
        CHECK_INT(count_casts(o, WF_BF16), 6);
        CHECK_INT(count_casts(o, WF_F32), 2);
        /* h2 reads r1 itself, and e reads h2's f32 cast */
        const wf_node *h2 = wf__graph_lookup(o->g, "h2"), *e = wf__graph_lookup(o->g, "e");
        if (h2 && e) {
            CHECK(!strcmp(h2->in[0].node->name, "r1"));
            CHECK(!strcmp(e->in[0].node->op->name, "Cast") && e->in[0].node->in[0].node == h2);
        }
        /* the fetched value keeps its dtype; an intermediate fetch maps to an f32 value too */
        CHECK_INT(wf__optimized_map(o, m.sm).node->out[0].dtype, WF_F32);
        CHECK(o->amp_report != NULL);
        if (o->amp_report) {
            CHECK_STR_CONTAINS(o->amp_report, "bf16 h1 (MatMul): allow list");
            CHECK_STR_CONTAINS(o->amp_report, "f32  e (Exp): deny list");
            CHECK_STR_CONTAINS(o->amp_report, "5 ops in bf16");
        }
    }
    wf__optimized_free(o);
    /* at level 1, fold turns the constants' casts into bf16 constants: only x's cast and e's remain */
    o = amp_optimize(m.g, &m.sm, 1, &m.x, 1, WF_BF16, 1, NULL, dev_native);
    if (o) {
        CHECK_INT(count_casts(o, WF_BF16), 2);
        CHECK_INT(count_casts(o, WF_F32), 2);
        const wf_node *h1 = wf__graph_lookup(o->g, "h1");
        if (h1) CHECK(!strcmp(h1->in[1].node->op->name, "Const") && h1->in[1].node->out[0].dtype == WF_BF16);
    }
    wf__optimized_free(o);
    /* fetching h1 as well: its f32 cast is what the fetch maps to */
    wf_output two[2] = {m.sm, m.h1};
    o = amp_optimize(m.g, two, 2, &m.x, 1, WF_F16, 0, NULL, dev_native);
    if (o) {
        wf_output h1 = wf__optimized_map(o, m.h1);
        CHECK(h1.node && !strcmp(h1.node->op->name, "Cast") && h1.node->out[0].dtype == WF_F32);
        CHECK_INT(dtype_of(o, "h1"), WF_F16);
    }
    wf__optimized_free(o);
    wf_graph_free(m.g);
}

/* A device without native 16-bit compute keeps the allow-list ops, and so everything after them. */
static void test_device_says_no(void)
{
    mlp m;
    build_mlp(&m);
    if (!m.g) return;
    wf__optimized *o = amp_optimize(m.g, &m.sm, 1, &m.x, 1, WF_BF16, 1, NULL, dev_slow);
    if (o) {
        CHECK_INT(count_op(o, "Cast"), 0);
        CHECK_INT(dtype_of(o, "h1"), WF_F32);
        CHECK_INT(dtype_of(o, "r1"), WF_F32);
        if (o->amp_report) {
            CHECK_STR_CONTAINS(o->amp_report, "f32  h1 (MatMul): allow list, TEST:0 does not compute it natively");
            CHECK_STR_CONTAINS(o->amp_report, "0 ops in bf16");
            CHECK_STR_CONTAINS(o->amp_report, "3 allow-list ops left in f32");
        }
    }
    wf__optimized_free(o);
    /* the pass disabled, or no precision: the graph is the plain one and nobody is asked */
    native_calls = 0;
    wf__opt_options off = {.level = 1, .amp = WF_BF16, .amp_device = dev_native, .disabled = "amp"};
    o = NULL;
    CHECK_OK(wf__optimize(m.g, &m.sm, 1, &m.x, 1, &off, &o));
    if (o) {
        CHECK_INT(count_op(o, "Cast"), 0);
        CHECK(o->amp_report == NULL);
    }
    wf__optimized_free(o);
    o = amp_optimize(m.g, &m.sm, 1, &m.x, 1, WF_F32, 1, NULL, dev_native);
    if (o) CHECK_INT(count_op(o, "Cast"), 0);
    wf__optimized_free(o);
    CHECK_INT(native_calls, 0);
    wf_graph_free(m.g);
}

/* The lists, edited: MatMul denied; Exp allowed; Relu taken out of every list. */
static void test_list_edits(void)
{
    mlp m;
    build_mlp(&m);
    if (!m.g) return;
    wf__optimized *o = amp_optimize(m.g, &m.sm, 1, &m.x, 1, WF_BF16, 0, "deny+=MatMul", dev_native);
    if (o) {
        CHECK_INT(count_op(o, "Cast"), 0);
        CHECK_INT(dtype_of(o, "h1"), WF_F32);
        if (o->amp_report) CHECK_STR_CONTAINS(o->amp_report, "f32  h1 (MatMul): deny list");
    }
    wf__optimized_free(o);
    o = amp_optimize(m.g, &m.sm, 1, &m.x, 1, WF_BF16, 0, "infer+=Exp;clear-=Relu", dev_native);
    if (o) {
        CHECK_INT(dtype_of(o, "b1"), WF_BF16);
        CHECK_INT(dtype_of(o, "r1"), WF_F32); /* in no list */
        CHECK_INT(dtype_of(o, "h2"), WF_BF16);
        CHECK_INT(dtype_of(o, "e"), WF_BF16); /* infer: reads h2 */
        if (o->amp_report) CHECK_STR_CONTAINS(o->amp_report, "f32  r1 (Relu): not in the lists");
    }
    wf__optimized_free(o);
    wf_graph_free(m.g);

    /* errors when the session is made, naming the edit or the op */
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    if (!g) return;
    static const struct {
        const char *lists, *msg;
    } bad[] = {{"deny+=NoSuchOp", "unknown op 'NoSuchOp'"},
               {"maybe+=MatMul", "'maybe+=MatMul' is not LIST+=OPS"},
               {"allow=MatMul", "'allow=MatMul' is not LIST+=OPS"},
               {"deny+=Exp;infer+=Relu,Bogus", "unknown op 'Bogus'"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        wf_session_options so;
        wf_session_options_init(&so);
        so.precision = WF_BF16;
        so.amp_lists = bad[i].lists;
        wf_session *s = NULL;
        wf_status *st = wf_session_new(ctx, g, &so, &s);
        CHECK(st != NULL && s == NULL);
        if (st) {
            CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
            CHECK_STR_CONTAINS(wf_status_message(st), bad[i].msg);
        }
        wf_status_free(st);
        wf_session_free(s);
    }
    wf_session_options so;
    wf_session_options_init(&so);
    so.precision = WF_I32;
    wf_session *s = NULL;
    wf_status *st = wf_session_new(ctx, g, &so, &s);
    CHECK(st != NULL);
    if (st) CHECK_STR_CONTAINS(wf_status_message(st), "precision i32 is not f32, bf16 or f16");
    wf_status_free(st);
    wf_session_free(s);
    wf_graph_free(g);
}

/* A user's Cast to bf16 of a converted value is that value; a Cast to f32 of bf16 then back is not
 * something the pass makes, and an f32 -> bf16 -> f32 pair (which rounds) is never cancelled. */
static void test_cast_pairs(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    if (!g) return;
    float w[16];
    fill(w, 16, 9, 1);
    wf_output x, W = konst(g, "W", 2, (int64_t[]){4, 4}, w), mm, c16, c32, y;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, (int64_t[]){4, 4}, &x));
    mm = op(g, "MatMul", "mm", (wf_output[]){x, W}, 2);
    wf_attr to16 = wf_attr_dtype("to", WF_BF16), to32 = wf_attr_dtype("to", WF_F32);
    wf_node *n;
    CHECK_OK(wf_op(g, "Cast", "user16", &mm, 1, &to16, 1, &n));
    c16 = (wf_output){n, 0};
    CHECK_OK(wf_op(g, "Cast", "user32", &c16, 1, &to32, 1, &n));
    c32 = (wf_output){n, 0};
    y = op(g, "Exp", "y", &c32, 1); /* deny: reads f32 */
    wf__optimized *o = amp_optimize(g, &y, 1, &x, 1, WF_BF16, 0, NULL, dev_native);
    if (o) {
        CHECK(wf__graph_lookup(o->g, "user16") == NULL); /* cancelled: mm is already bf16 */
        const wf_node *u32 = wf__graph_lookup(o->g, "user32");
        CHECK(u32 && !strcmp(u32->in[0].node->name, "mm"));
        /* the pass's own f32 cast of mm is read by nothing, so pruned at level 0 too */
        CHECK_INT(count_casts(o, WF_F32), 1);
        CHECK_INT(count_casts(o, WF_BF16), 2); /* x and W */
    }
    wf__optimized_free(o);
    wf_graph_free(g);
}

/* Runs the graph of `o` (already optimised) in a plain session, x fed, and returns fetch's f32 values. */
static wf_tensor *run_graph(wf_graph *g, wf_output x, const wf_tensor *xv, wf_output fetch)
{
    wf_session_options so;
    wf_session_options_init(&so);
    so.opt_level = 0;
    so.device = "CPU:0";
    wf_session *s = NULL;
    wf_tensor *out = NULL;
    CHECK_OK(wf_session_new(ctx, g, &so, &s));
    wf_feed f = {x, xv};
    if (s) CHECK_OK(wf_session_run(s, &f, 1, &fetch, 1, &out, NULL));
    wf_session_free(s);
    return out;
}

/* The same program with the pass on (every op it can, bf16 and f16) and off, NaN and Inf rows included:
 * each output element within the dtype's tolerance of the f32 one, relative to the output's scale, and
 * NaN exactly where f32 has NaN. */
static void test_values_agree(void)
{
    mlp m;
    build_mlp(&m);
    if (!m.g) return;
    float xv[8 * 16];
    fill(xv, 8 * 16, 11, 2);
    xv[3 * 16 + 5] = NAN;      /* row 3: NaN all the way */
    xv[5 * 16 + 2] = INFINITY; /* row 5: +Inf through the first MatMul */
    wf_tensor *xt = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){8, 16}, xv, &xt));
    wf_output fetch[2] = {m.sm, m.h3};
    wf_tensor *want[2] = {run_graph(m.g, m.x, xt, fetch[0]), run_graph(m.g, m.x, xt, fetch[1])};
    const wf_dtype los[2] = {WF_BF16, WF_F16};
    const double tol[2] = {3e-2, 4e-3}; /* a few ulps of 8 and 11 bits through three matrix products */
    for (int d = 0; d < 2; d++) {
        wf__optimized *o = amp_optimize(m.g, fetch, 2, &m.x, 1, los[d], 1, NULL, dev_native);
        if (!o || !want[0] || !want[1]) {
            wf__optimized_free(o);
            continue;
        }
        CHECK_INT(dtype_of(o, "h3"), los[d]);
        for (int k = 0; k < 2; k++) {
            wf_tensor *got = run_graph(o->g, wf__optimized_map(o, m.x), xt, wf__optimized_map(o, fetch[k]));
            if (!got) continue;
            CHECK_INT(wf_tensor_dtype(got), WF_F32);
            const float *a = wf_tensor_data(got), *b = wf_tensor_data(want[k]);
            int64_t n = wf_tensor_size(got);
            double scale = 0;
            for (int64_t i = 0; i < n; i++)
                if (isfinite(b[i]) && fabs(b[i]) > scale) scale = fabs(b[i]);
            int nan_rows = 0;
            for (int64_t i = 0; i < n; i++) {
                if (isnan(b[i]) || isinf(b[i])) {
                    CHECK(isnan(a[i]) == isnan(b[i]) && (isnan(b[i]) || a[i] == b[i]));
                    nan_rows += isnan(b[i]) && i / 4 == 3;
                    continue;
                }
                if (!(fabs(a[i] - b[i]) <= tol[d] * (scale > 1 ? scale : 1)))
                    CHECK_FAIL_("%s output %d [%lld]: %g vs f32 %g", wf_dtype_name(los[d]), k, (long long)i, a[i],
                                b[i]);
            }
            CHECK_INT(nan_rows, 4); /* the NaN row stays NaN in every column */
            wf_tensor_free(got);
        }
        wf__optimized_free(o);
    }
    wf_tensor_free(want[0]);
    wf_tensor_free(want[1]);
    wf_tensor_free(xt);
    wf_graph_free(m.g);
}

/* Gradient graphs convert too: d loss / d W1 of the MLP's first layers, with the pass on and off. */
static void test_gradients(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    if (!g) return;
    float w1[16 * 32], w2[32 * 4], xv[8 * 16];
    fill(w1, 16 * 32, 21, 0.3f);
    fill(w2, 32 * 4, 22, 0.3f);
    fill(xv, 8 * 16, 23, 1);
    wf_output x, W1 = konst(g, "W1", 2, (int64_t[]){16, 32}, w1), W2 = konst(g, "W2", 2, (int64_t[]){32, 4}, w2);
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, (int64_t[]){8, 16}, &x));
    wf_output h = op(g, "MatMul", "h", (wf_output[]){x, W1}, 2);
    wf_output r = op(g, "Relu", "r", &h, 1);
    wf_output y = op(g, "MatMul", "y", (wf_output[]){r, W2}, 2);
    wf_output sq = op(g, "Mul", "sq", (wf_output[]){y, y}, 2), loss, dW1;
    wf_node *ln = NULL;
    CHECK_OK(wf_op(g, "ReduceSum", "loss", &sq, 1, NULL, 0, &ln));
    loss = (wf_output){ln, 0};
    if (!ln) {
        wf_graph_free(g);
        return;
    }
    CHECK_OK(wf_gradients(g, &loss, 1, NULL, &W1, 1, &dW1));
    if (!dW1.node) {
        wf_graph_free(g);
        return;
    }
    wf_tensor *xt = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){8, 16}, xv, &xt));
    wf_tensor *want = run_graph(g, x, xt, dW1);
    wf__optimized *o = amp_optimize(g, &dW1, 1, &x, 1, WF_BF16, 1, NULL, dev_native);
    if (o && want) {
        /* the backward MatMuls convert (they are allow-list ops of the gradient graph) */
        int bf16_mm = 0;
        for (int i = 0; i < o->g->n; i++)
            bf16_mm += !strcmp(o->g->nodes[i]->op->name, "MatMul") && o->g->nodes[i]->out[0].dtype == WF_BF16;
        CHECK(bf16_mm >= 3);
        wf_tensor *got = run_graph(o->g, wf__optimized_map(o, x), xt, wf__optimized_map(o, dW1));
        if (got) {
            const float *a = wf_tensor_data(got), *b = wf_tensor_data(want);
            double scale = 0, worst = 0;
            for (int64_t i = 0; i < wf_tensor_size(got); i++) {
                if (fabs(b[i]) > scale) scale = fabs(b[i]);
                if (fabs(a[i] - b[i]) > worst) worst = fabs(a[i] - b[i]);
            }
            CHECK(scale > 0);
            if (!(worst <= 3e-2 * scale)) CHECK_FAIL_("bf16 gradient off by %g (scale %g)", worst, scale);
            wf_tensor_free(got);
        }
    }
    wf__optimized_free(o);
    wf_tensor_free(want);
    wf_tensor_free(xt);
    wf_graph_free(g);
}

/* Through a real session: what this CPU says decides, the report says why, and the fetches stay f32. */
static void test_session(void)
{
    mlp m;
    build_mlp(&m);
    if (!m.g) return;
    wf_device_info di;
    CHECK_OK(wf_context_device(ctx, 0, &di));
    bool native_bf16 = di.fast_dtypes >> WF_BF16 & 1;
    CHECK(di.precision != NULL && *di.precision);
    CHECK_INT(di.fast_dtypes >> WF_F16 & 1, 0); /* the CPU converts f16 through f32: never native */
    float xv[8 * 16];
    fill(xv, 8 * 16, 31, 1);
    wf_tensor *xt = NULL, *out = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){8, 16}, xv, &xt));
    for (int d = 0; d < 2; d++) {
        wf_session_options so;
        wf_session_options_init(&so);
        so.device = "CPU:0";
        so.precision = d ? WF_F16 : WF_BF16;
        wf_session *s = NULL;
        CHECK_OK(wf_session_new(ctx, m.g, &so, &s));
        if (!s) continue;
        wf_feed f = {m.x, xt};
        char *text = NULL;
        CHECK_OK(wf_session_run(s, &f, 1, &m.sm, 1, &out, NULL));
        if (out) CHECK_INT(wf_tensor_dtype(out), WF_F32);
        wf_tensor_free(out);
        out = NULL;
        CHECK_OK(wf_session_precision_report(s, &f, 1, &m.sm, 1, &text));
        if (text) {
            if (d == 0 && native_bf16) {
                CHECK_STR_CONTAINS(text, "bf16 h1 (MatMul): allow list, CPU:0 computes it natively");
            } else {
                CHECK_STR_CONTAINS(text, d ? "f32  h1 (MatMul): allow list, CPU:0 does not compute f16 natively"
                                           : "f32  h1 (MatMul): allow list, CPU:0 does not compute bf16 natively");
                CHECK_STR_CONTAINS(text, "0 ops in");
            }
        }
        wf_free(text);
        wf_session_free(s);
    }
    /* NULL arguments are an error naming the call */
    char *none = NULL;
    wf_status *bad = wf_session_precision_report(NULL, NULL, 0, &m.sm, 1, &none);
    CHECK(bad != NULL && none == NULL);
    if (bad) CHECK_STR_CONTAINS(wf_status_message(bad), "wf_session_precision_report");
    wf_status_free(bad);
    /* no precision: an empty report */
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &s));
    char *text = NULL;
    wf_feed f = {m.x, xt};
    if (s) CHECK_OK(wf_session_precision_report(s, &f, 1, &m.sm, 1, &text));
    if (text) CHECK_INT(strlen(text), 0);
    wf_free(text);
    wf_session_free(s);
    wf_tensor_free(xt);
    wf_graph_free(m.g);
}

int main(void)
{
    CHECK_OK(wf_context_new(NULL, &ctx));
    if (!ctx) return 1;
    RUN_TEST(test_casts_inserted);
    RUN_TEST(test_device_says_no);
    RUN_TEST(test_list_edits);
    RUN_TEST(test_cast_pairs);
    RUN_TEST(test_values_agree);
    RUN_TEST(test_gradients);
    RUN_TEST(test_session);
    wf_context_free(ctx);
    return check_summary();
}
