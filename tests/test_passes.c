/*
 * The graph optimiser (src/passes/): each pass on hand-made graphs, by the nodes of the optimised
 * graph (wf__optimize directly) and by values through a session at opt_level 0 and 1, computed here by
 * hand; what must never be touched (fed nodes, variables, stateful ops, different device requests);
 * --disable-pass, --dump-graph and the options' errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "passes/passes.h"

static wf_context *ctx;

/* How many nodes of the optimised graph run `op`. */
static int count_op(const wf__optimized *o, const char *op)
{
    int n = 0;
    for (int i = 0; i < o->g->n; i++) n += !strcmp(o->g->nodes[i]->op->name, op);
    return n;
}

static wf__optimized *optimize(wf_graph *g, const wf_output *roots, int nr, const wf_output *keep, int nk,
                               const char *disabled)
{
    wf__opt_options o = {.level = 1, .disabled = disabled};
    wf__optimized *r = NULL;
    CHECK_OK(wf__optimize(g, roots, nr, keep, nk, &o, &r));
    return r;
}

/* Runs fetch with x fed at opt_level `level`; the f32 values into want (n of them). */
static void run_values(wf_graph *g, int level, wf_output x, const float *xv, int64_t n, wf_output fetch, float *got)
{
    wf_session_options so;
    wf_session_options_init(&so);
    so.opt_level = level;
    wf_session *s = NULL;
    wf_tensor *xt = NULL, *out = NULL;
    CHECK_OK(wf_session_new(ctx, g, &so, &s));
    CHECK_OK(wf_tensor_new(WF_F32, 1, (int64_t[]){n}, xv, &xt));
    wf_feed f = {x, xt};
    if (s && xt) CHECK_OK(wf_session_run(s, &f, 1, &fetch, 1, &out, NULL));
    if (out) memcpy(got, wf_tensor_data(out), sizeof(float) * (size_t)n);
    wf_tensor_free(out);
    wf_tensor_free(xt);
    wf_session_free(s);
}

static void test_default_level(void)
{
    wf_session_options so;
    wf_session_options_init(&so);
    CHECK_INT(so.opt_level, WF_OPT_LEVEL_DEFAULT);
    CHECK_INT(WF_OPT_LEVEL_DEFAULT, 1);
}

/* Identity, inference Dropout and a Cast to the same dtype go; a Dropout whose mask is read and real
 * Casts stay. */
static void test_identity(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, id, dr, c_same, r, c_half, back;
    wf_node *drop_node = NULL;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, (int64_t[]){4}, &x));
    CHECK_OK(wf_op(g, "Identity", "id", &x, 1, NULL, 0, &id.node));
    id.index = 0;
    CHECK_OK(wf_op(g, "Dropout", "drop", &id, 1, NULL, 0, &drop_node));
    dr = (wf_output){drop_node, 0};
    wf_attr to32 = wf_attr_dtype("to", WF_F32), to16 = wf_attr_dtype("to", WF_F16);
    CHECK_OK(wf_op(g, "Cast", "same", &dr, 1, &to32, 1, &c_same.node));
    c_same.index = 0;
    CHECK_OK(wf_relu(g, "r", c_same, &r));
    CHECK_OK(wf_op(g, "Cast", "half", &r, 1, &to16, 1, &c_half.node));
    c_half.index = 0;
    CHECK_OK(wf_op(g, "Cast", "back", &c_half, 1, &to32, 1, &back.node));
    back.index = 0;

    wf_output roots[1] = {back};
    wf__optimized *o = optimize(g, roots, 1, &x, 1, NULL);
    if (o) {
        CHECK_INT(count_op(o, "Identity"), 0);
        CHECK_INT(count_op(o, "Dropout"), 0);
        CHECK_INT(count_op(o, "Cast"), 2); /* half and back */
        /* the removed nodes' outputs are their input's */
        wf_output m = wf__optimized_map(o, c_same);
        CHECK(m.node && !strcmp(m.node->name, "x"));
        CHECK(wf__optimized_map(o, r).node == wf__graph_lookup(o->g, "r"));
        CHECK_INT(o->removed, 3);
    }
    wf__optimized_free(o);
    /* a Dropout whose mask is fetched stays */
    wf_output mask = {drop_node, 1};
    o = optimize(g, &mask, 1, &x, 1, NULL);
    if (o) CHECK_INT(count_op(o, "Dropout"), 1);
    wf__optimized_free(o);
    /* disabled, nothing goes */
    o = optimize(g, roots, 1, &x, 1, "identity");
    if (o) {
        CHECK_INT(count_op(o, "Identity"), 1);
        CHECK_INT(count_op(o, "Cast"), 3);
    }
    wf__optimized_free(o);

    /* the values: relu(x) through half and back, by hand (all exact in f16) */
    const float xv[4] = {-2, 0.5f, 3, -0.25f};
    float got0[4] = {0}, got1[4] = {0};
    run_values(g, 0, x, xv, 4, back, got0);
    run_values(g, 1, x, xv, 4, back, got1);
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(got0[i], xv[i] > 0 ? xv[i] : 0, 0);
        CHECK_NEAR(got1[i], xv[i] > 0 ? xv[i] : 0, 0);
    }
    wf_graph_free(g);
}

/* Two identical Relus merge, and so the Adds over them; a LeakyRelu with another alpha, a node with
 * another device request and a stateful random op do not. */
static void test_cse(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, r1, r2, a1, a2, l1, l2, r3, m, sum;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, (int64_t[]){4}, &x));
    CHECK_OK(wf_relu(g, "r1", x, &r1));
    CHECK_OK(wf_relu(g, "r2", x, &r2));
    CHECK_OK(wf_add(g, "a1", r1, x, &a1));
    CHECK_OK(wf_add(g, "a2", r2, x, &a2)); /* same as a1 once r2 is r1 */
    wf_attr al1 = wf_attr_float("alpha", 0.1), al2 = wf_attr_float("alpha", 0.2);
    CHECK_OK(wf_op(g, "LeakyRelu", "l1", &x, 1, &al1, 1, &l1.node));
    CHECK_OK(wf_op(g, "LeakyRelu", "l2", &x, 1, &al2, 1, &l2.node));
    l1.index = l2.index = 0;
    CHECK_OK(wf_graph_set_device(g, "CPU:0"));
    CHECK_OK(wf_relu(g, "r3", x, &r3)); /* asks for a device: not merged with r1 */
    CHECK_OK(wf_graph_set_device(g, ""));
    CHECK_OK(wf_mul(g, "m", a1, a2, &m));
    CHECK_OK(wf_add(g, "s1", m, l1, &sum));
    CHECK_OK(wf_add(g, "s2", sum, l2, &sum));
    CHECK_OK(wf_add(g, "s3", sum, r3, &sum));
    wf__optimized *o = optimize(g, &sum, 1, &x, 1, NULL);
    if (o) {
        CHECK_INT(count_op(o, "Relu"), 2);      /* r1 and r3 */
        CHECK_INT(count_op(o, "LeakyRelu"), 2);
        CHECK_INT(count_op(o, "Add"), 4);       /* a1, s1, s2, s3 */
        CHECK(wf__optimized_map(o, a2).node == wf__optimized_map(o, a1).node);
        CHECK(wf__optimized_map(o, r3).node != wf__optimized_map(o, r1).node);
    }
    wf__optimized_free(o);
    o = optimize(g, &sum, 1, &x, 1, "cse");
    if (o) CHECK_INT(count_op(o, "Relu"), 3);
    wf__optimized_free(o);
    /* values: (2 relu(x) ... ) worked here: m = (relu x + x)^2, + leaky 0.1 + leaky 0.2 + relu */
    const float xv[4] = {-1, 2, 0, -4};
    float got0[4] = {0}, got1[4] = {0};
    run_values(g, 0, x, xv, 4, sum, got0);
    run_values(g, 1, x, xv, 4, sum, got1);
    for (int i = 0; i < 4; i++) {
        double v = xv[i], rl = v > 0 ? v : 0, a = rl + v;
        double want = a * a + (v > 0 ? v : 0.1 * v) + (v > 0 ? v : 0.2 * v) + rl;
        CHECK_NEAR(got0[i], want, 1e-6);
        CHECK_NEAR(got1[i], want, 1e-6);
    }
    wf_graph_free(g);

    /* an Assign is stateful: two of the same value stay two (each commits its variable) */
    CHECK_OK(wf_graph_new(&g));
    float iv[4] = {0};
    wf_tensor *it = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, (int64_t[]){4}, iv, &it));
    wf_output v, as1, as2, d;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, (int64_t[]){4}, &x));
    CHECK_OK(wf_variable(g, "v", it, &v));
    wf_tensor_free(it);
    CHECK_OK(wf_assign(g, "as1", v, x, &as1));
    CHECK_OK(wf_assign(g, "as2", v, x, &as2));
    CHECK_OK(wf_add(g, "d", as1, as2, &d));
    o = optimize(g, &d, 1, &x, 1, NULL);
    if (o) CHECK_INT(count_op(o, "Assign"), 2);
    wf__optimized_free(o);
    wf_graph_free(g);
}

/* Shape arithmetic on constants becomes a constant; a Shape of a placeholder (which a feed may
 * change) and a node of a placeholder stay. */
static void test_fold(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    float cv[6] = {1, 2, 3, 4, 5, 6};
    wf_tensor *ct = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){2, 3}, cv, &ct));
    wf_output c, shc, x, shx, r;
    CHECK_OK(wf_const(g, "c", ct, &c));
    wf_tensor_free(ct);
    CHECK_OK(wf_op(g, "Shape", "shc", &c, 1, NULL, 0, &shc.node)); /* [2, 3] */
    shc.index = 0;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, (int64_t[]){3, 2}, &x));
    CHECK_OK(wf_op(g, "Shape", "shx", &x, 1, NULL, 0, &shx.node));
    shx.index = 0;
    wf_output rin[2] = {x, shc};
    CHECK_OK(wf_op(g, "Reshape", "r", rin, 2, NULL, 0, &r.node)); /* x as [2, 3] */
    r.index = 0;
    wf_output roots[2] = {r, shx};
    wf__optimized *o = optimize(g, roots, 2, &x, 1, NULL);
    if (o) {
        CHECK_INT(count_op(o, "Shape"), 1); /* shx */
        const wf_node *f = wf__graph_lookup(o->g, "shc");
        CHECK(f && !strcmp(f->op->name, "Const"));
        if (f) {
            const wf_tensor *v = wf__attr_get(f->op, f->attrs, "value")->t;
            CHECK_INT(v->dtype, WF_I64);
            CHECK_INT((int)v->size, 2);
            CHECK_INT((int)((int64_t *)v->data)[0], 2);
            CHECK_INT((int)((int64_t *)v->data)[1], 3);
        }
        CHECK_INT(count_op(o, "Reshape"), 1);
    }
    wf__optimized_free(o);
    o = optimize(g, roots, 2, &x, 1, "fold");
    if (o) CHECK_INT(count_op(o, "Shape"), 2);
    wf__optimized_free(o);
    wf_graph_free(g);
}

/* Fed nodes the fetches do not need stay (the plan checks their feeds); what only they need goes. An
 * Assign is kept, and its variable when fed; a constant's tensor is the graph's own (not a copy). */
static void test_keep_and_share(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, unused, v, one, a, y, dead;
    float iv[2] = {1, 2};
    wf_tensor *it = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, (int64_t[]){2}, iv, &it));
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, (int64_t[]){2}, &x));
    CHECK_OK(wf_placeholder(g, "unused", WF_F32, 1, (int64_t[]){2}, &unused));
    CHECK_OK(wf_variable(g, "v", it, &v));
    CHECK_OK(wf_const(g, "one", it, &one));
    wf_tensor_free(it);
    CHECK_OK(wf_add(g, "a", x, one, &a));
    CHECK_OK(wf_relu(g, "dead", x, &dead)); /* nobody fetches it */
    CHECK_OK(wf_assign(g, "y", v, a, &y));
    wf_output keep[2] = {x, unused};
    wf__optimized *o = optimize(g, &y, 1, keep, 2, NULL);
    if (o) {
        CHECK(wf__graph_lookup(o->g, "unused") != NULL);
        CHECK(wf__graph_lookup(o->g, "dead") == NULL);
        CHECK(wf__graph_lookup(o->g, "y") != NULL);
        CHECK(wf__graph_lookup(o->g, "v") == NULL); /* an Assign names its variable; nothing reads v */
        const wf_node *c = wf__graph_lookup(o->g, "one");
        CHECK(c && wf__attr_get(c->op, c->attrs, "value")->t == wf__attr_get(one.node->op, one.node->attrs, "value")->t);
        CHECK(wf__optimized_map(o, dead).node == NULL);
    }
    wf__optimized_free(o);
    /* a session feeds its variables: kept when fed */
    wf_output keep3[3] = {x, unused, v};
    o = optimize(g, &y, 1, keep3, 3, NULL);
    if (o) CHECK(wf__graph_lookup(o->g, "v") != NULL);
    wf__optimized_free(o);
    wf_graph_free(g);
}

/* The options' errors come when the session is made; feeding a node the passes would remove is the
 * planner's error; --dump-graph writes each step. */
static void test_options_and_dump(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, id, r;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, (int64_t[]){2}, &x));
    CHECK_OK(wf_op(g, "Identity", "id", &x, 1, NULL, 0, &id.node));
    id.index = 0;
    CHECK_OK(wf_relu(g, "r", id, &r));
    wf_session_options so;
    wf_session_options_init(&so);
    wf_session *s = NULL;
    so.disable_passes = "identity,nosuch";
    CHECK_ERR(wf_session_new(ctx, g, &so, &s), WF_INVALID_ARGUMENT, "unknown pass 'nosuch' to disable");
    so.disable_passes = NULL;
    so.opt_level = 7;
    CHECK_ERR(wf_session_new(ctx, g, &so, &s), WF_INVALID_ARGUMENT, "optimisation level 7 is not 0 or 1");
    char dir[] = "/tmp/weft-passes-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    so.opt_level = 1;
    so.dump_graph_dir = dir;
    CHECK_OK(wf_session_new(ctx, g, &so, &s));
    wf_tensor *xt = NULL, *out = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, (int64_t[]){2}, (float[]){-1, 3}, &xt));
    if (s && xt) {
        wf_feed bad = {id, xt};
        CHECK_ERR(wf_session_run(s, &bad, 1, &r, 1, &out, NULL), WF_INVALID_ARGUMENT,
                  "cannot feed node 'id' (Identity): only Placeholder nodes can be fed");
        wf_feed f = {x, xt};
        CHECK_OK(wf_session_run(s, &f, 1, &r, 1, &out, NULL));
        if (out) {
            CHECK_NEAR(((float *)wf_tensor_data(out))[0], 0, 0);
            CHECK_NEAR(((float *)wf_tensor_data(out))[1], 3, 0);
        }
        const char *steps[] = {"00-input", "01-prune", "02-identity", "03-bnfold", "04-fold", "05-cse"};
        for (int i = 0; i < 6; i++) {
            char path[256], text[512] = "";
            snprintf(path, sizeof path, "%s/%s.txt", dir, steps[i]);
            FILE *fp = fopen(path, "r");
            CHECK(fp != NULL);
            if (!fp) continue;
            size_t n = fread(text, 1, sizeof text - 1, fp);
            text[n] = 0;
            fclose(fp);
            CHECK_STR_CONTAINS(text, "x = Placeholder()");
            if (i >= 2) CHECK_STR_CONTAINS(text, "r = Relu(x:0)");
            else CHECK_STR_CONTAINS(text, "r = Relu(id:0)");
            unlink(path);
        }
        rmdir(dir);
    }
    wf_tensor_free(out);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

int main(void)
{
    CHECK_OK(wf_context_new(NULL, &ctx));
    if (!ctx) return 1;
    RUN_TEST(test_default_level);
    RUN_TEST(test_identity);
    RUN_TEST(test_cse);
    RUN_TEST(test_fold);
    RUN_TEST(test_keep_and_share);
    RUN_TEST(test_options_and_dump);
    wf_context_free(ctx);
    return check_summary();
}
