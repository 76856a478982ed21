/*
 * Variables: a session keeps their values between runs, every read in a run sees the values from
 * before it, Assigns commit together when the run succeeds and not at all when it fails; SGD on a
 * linear model checked step by step against the same update computed here in double; checkpoints
 * save and restore every variable, training resumed from one continues exactly, and a checkpoint that
 * does not fit the graph changes nothing.
 */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static wf_context *ctx;

static wf_tensor *vec(wf_dtype dt, int n, const double *v)
{
    int64_t d[1] = {n};
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(dt, 1, d, NULL, &t));
    for (int i = 0; t && i < n; i++) {
        if (dt == WF_F64) ((double *)wf_tensor_data(t))[i] = v[i];
        else ((float *)wf_tensor_data(t))[i] = (float)v[i];
    }
    return t;
}

/* y = x @ w + b, loss = mean((y - t)^2), w -= lr * dw, b -= lr * db */
typedef struct model {
    wf_graph *g;
    wf_output x, t, w, b, loss, aw, ab;
} model;

enum { N = 4, K = 3 };
static const double X[N][K] = {{1, 2, 0.5}, {-1, 0.5, 2}, {0.3, -2, 1}, {2, 1, -1}};
static const double T[N] = {1, -2, 0.5, 3};
static const double LR = 0.05;

static void build(model *m)
{
    CHECK_OK(wf_graph_new(&m->g));
    int64_t xd[2] = {N, K}, td[1] = {N};
    double w0[K] = {0.1, -0.2, 0.3}, b0[1] = {0.05};
    wf_tensor *wt = vec(WF_F64, K, w0), *bt = vec(WF_F64, 1, b0);
    CHECK_OK(wf_placeholder(m->g, "x", WF_F64, 2, xd, &m->x));
    CHECK_OK(wf_placeholder(m->g, "t", WF_F64, 1, td, &m->t));
    CHECK_OK(wf_variable(m->g, "w", wt, &m->w));
    CHECK_OK(wf_variable(m->g, "b", bt, &m->b));
    wf_tensor_free(wt);
    wf_tensor_free(bt);
    wf_output y, yb, d, sq, lr, gw, gb, uw, ub, nw, nb;
    CHECK_OK(wf_matmul(m->g, "y", m->x, m->w, 0, 0, &y));
    CHECK_OK(wf_add(m->g, "yb", y, m->b, &yb));
    CHECK_OK(wf_binary(m->g, "Sub", "d", yb, m->t, &d));
    CHECK_OK(wf_mul(m->g, "sq", d, d, &sq));
    wf_attr keep = wf_attr_int("keepdims", 0);
    CHECK_OK(wf_op(m->g, "ReduceMean", "loss", &sq, 1, &keep, 1, NULL));
    CHECK_OK(wf_graph_output(m->g, "loss", &m->loss));
    wf_output xs[2] = {m->w, m->b}, dx[2];
    CHECK_OK(wf_gradients(m->g, &m->loss, 1, NULL, xs, 2, dx));
    gw = dx[0];
    gb = dx[1];
    CHECK_OK(wf_const_scalar(m->g, "lr", WF_F64, LR, &lr));
    CHECK_OK(wf_mul(m->g, "uw", gw, lr, &uw));
    CHECK_OK(wf_mul(m->g, "ub", gb, lr, &ub));
    CHECK_OK(wf_binary(m->g, "Sub", "nw", m->w, uw, &nw));
    CHECK_OK(wf_binary(m->g, "Sub", "nb", m->b, ub, &nb));
    CHECK_OK(wf_assign(m->g, "assign_w", m->w, nw, &m->aw));
    CHECK_OK(wf_assign(m->g, "assign_b", m->b, nb, &m->ab));
}

static void feeds(wf_feed *f, wf_tensor **xt, wf_tensor **tt, const model *m)
{
    int64_t xd[2] = {N, K};
    CHECK_OK(wf_tensor_new(WF_F64, 2, xd, X, xt));
    *tt = vec(WF_F64, N, T);
    f[0] = (wf_feed){m->x, *xt};
    f[1] = (wf_feed){m->t, *tt};
}

/* one SGD step in double, the reference */
static double ref_step(double *w, double *b)
{
    double gw[K] = {0}, gb = 0, loss = 0;
    for (int i = 0; i < N; i++) {
        double y = *b;
        for (int k = 0; k < K; k++) y += X[i][k] * w[k];
        double d = y - T[i];
        loss += d * d / N;
        for (int k = 0; k < K; k++) gw[k] += 2 * d * X[i][k] / N;
        gb += 2 * d / N;
    }
    for (int k = 0; k < K; k++) w[k] -= LR * gw[k];
    *b -= LR * gb;
    return loss;
}

static double get1(wf_session *s, const char *name, int i)
{
    wf_tensor *v = NULL;
    CHECK_OK(wf_session_get_variable(s, name, &v));
    double r = v ? ((double *)wf_tensor_data(v))[i] : NAN;
    wf_tensor_free(v);
    return r;
}

static void step(wf_session *s, const model *m, wf_feed *f, double *loss)
{
    wf_output targets[2] = {m->aw, m->ab};
    wf_run_options ro = {.targets = targets, .n_targets = 2};
    wf_tensor *l = NULL;
    CHECK_OK(wf_session_run(s, f, 2, &m->loss, 1, &l, &ro));
    *loss = l ? *(double *)wf_tensor_data(l) : NAN;
    wf_tensor_free(l);
}

static void test_sgd_steps(void)
{
    model m;
    build(&m);
    wf_session *s;
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &s));
    wf_feed f[2];
    wf_tensor *xt, *tt;
    feeds(f, &xt, &tt, &m);
    double w[K] = {0.1, -0.2, 0.3}, b = 0.05;
    for (int it = 0; it < 5; it++) {
        double loss, want = ref_step(w, &b);
        step(s, &m, f, &loss);
        CHECK_NEAR(loss, want, 1e-12); /* the loss of the values before the step */
        for (int k = 0; k < K; k++) CHECK_NEAR(get1(s, "w", k), w[k], 1e-12);
        CHECK_NEAR(get1(s, "b", 0), b, 1e-12);
    }
    /* fetching only the loss changes nothing */
    wf_tensor *l = NULL;
    CHECK_OK(wf_session_run(s, f, 2, &m.loss, 1, &l, NULL));
    wf_tensor_free(l);
    CHECK_NEAR(get1(s, "w", 0), w[0], 1e-12);
    /* another session over the same graph starts from the initial values */
    wf_session *s2;
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &s2));
    CHECK_NEAR(get1(s2, "w", 0), 0.1, 0);
    wf_session_free(s2);
    wf_tensor_free(xt);
    wf_tensor_free(tt);
    wf_session_free(s);
    wf_graph_free(m.g);
}

/* v <- v + 1 while b = 10 v reads the old value; a failing run commits nothing */
static void test_reads_before_writes(void)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    double one = 1;
    wf_tensor *it = NULL;
    CHECK_OK(wf_tensor_new(WF_F64, 0, NULL, &one, &it));
    wf_output v, c1, c10, nv, a, bb, idx, gat, bad;
    CHECK_OK(wf_variable(g, "v", it, &v));
    wf_tensor_free(it);
    CHECK_OK(wf_const_scalar(g, "one", WF_F64, 1, &c1));
    CHECK_OK(wf_const_scalar(g, "ten", WF_F64, 10, &c10));
    CHECK_OK(wf_add(g, "nv", v, c1, &nv));
    CHECK_OK(wf_assign(g, "inc", v, nv, &a));
    CHECK_OK(wf_mul(g, "b", v, c10, &bb));
    wf_session *s;
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_run_options ro = {.targets = &a, .n_targets = 1};
    for (int i = 0; i < 3; i++) {
        wf_tensor *out = NULL;
        CHECK_OK(wf_session_run(s, NULL, 0, &bb, 1, &out, &ro));
        if (out) CHECK_NEAR(*(double *)wf_tensor_data(out), 10.0 * (i + 1), 0);
        wf_tensor_free(out);
        CHECK_NEAR(get1(s, "v", 0), i + 2, 0);
    }
    /* a run whose other target fails: Gather out of range; v keeps its value */
    double vals[2] = {5, 6};
    wf_tensor *vt = vec(WF_F64, 2, vals);
    wf_output tab;
    CHECK_OK(wf_const(g, "tab", vt, &tab));
    wf_tensor_free(vt);
    int64_t one_d[1] = {1};
    CHECK_OK(wf_placeholder(g, "idx", WF_I64, 1, one_d, &idx));
    wf_attr ax = wf_attr_int("axis", 0);
    CHECK_OK(wf_op(g, "Gather", "gat", (wf_output[]){tab, idx}, 2, &ax, 1, NULL));
    CHECK_OK(wf_graph_output(g, "gat", &gat));
    wf_tensor *ixt;
    int64_t seven = 7;
    CHECK_OK(wf_tensor_new(WF_I64, 1, one_d, &seven, &ixt));
    wf_feed fi = {idx, ixt};
    wf_output tg[2] = {a, gat};
    wf_run_options ro2 = {.targets = tg, .n_targets = 2};
    wf_status *st = wf_session_run(s, &fi, 1, NULL, 0, NULL, &ro2);
    CHECK(st != NULL);
    wf_status_free(st);
    CHECK_NEAR(get1(s, "v", 0), 4, 0);
    wf_tensor_free(ixt);
    /* wrong variable use */
    CHECK_ERR(wf_assign(g, "bad", c1, c1, &bad), WF_INVALID_ARGUMENT, "node 'one' is not a Variable");
    wf_output f32one;
    CHECK_OK(wf_const_scalar(g, "f32one", WF_F32, 1, &f32one));
    CHECK_ERR(wf_assign(g, "bad2", v, f32one, &bad), WF_INVALID_ARGUMENT, "variable 'v' is f64[] but the value is f32[]");
    wf_tensor *w2 = NULL;
    CHECK_ERR(wf_session_get_variable(s, "nope", &w2), WF_NOT_FOUND, "no variable named 'nope'");
    double two[2] = {1, 2};
    wf_tensor *t2 = vec(WF_F64, 2, two);
    CHECK_ERR(wf_session_set_variable(s, "v", t2), WF_INVALID_ARGUMENT, "variable 'v' is f64[] but the value is f64[2]");
    wf_tensor_free(t2);
    double nine = 9;
    wf_tensor *t9 = NULL;
    CHECK_OK(wf_tensor_new(WF_F64, 0, NULL, &nine, &t9));
    CHECK_OK(wf_session_set_variable(s, "v", t9));
    wf_tensor_free(t9);
    CHECK_NEAR(get1(s, "v", 0), 9, 0);
    wf_session_free(s);
    wf_graph_free(g);
}

static void test_checkpoint_resume(void)
{
    char dir[] = "/tmp/weft-ckpt-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], other[256], trunc[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(other, sizeof other, "%s/other.safetensors", dir);
    snprintf(trunc, sizeof trunc, "%s/trunc.safetensors", dir);
    model m;
    build(&m);
    wf_feed f[2];
    wf_tensor *xt, *tt;
    feeds(f, &xt, &tt, &m);
    wf_session *a, *b;
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &a));
    double loss;
    for (int i = 0; i < 3; i++) step(a, &m, f, &loss);
    CHECK_OK(wf_session_save(a, path));
    for (int i = 0; i < 4; i++) step(a, &m, f, &loss); /* the uninterrupted run: 7 steps */
    CHECK_OK(wf_session_new(ctx, m.g, NULL, &b));
    CHECK_OK(wf_session_restore(b, path));
    for (int i = 0; i < 4; i++) step(b, &m, f, &loss); /* resumed: 3 + 4 */
    for (int k = 0; k < K; k++) CHECK(get1(a, "w", k) == get1(b, "w", k)); /* bit for bit */
    CHECK(get1(a, "b", 0) == get1(b, "b", 0));

    /* a checkpoint of another model: names differ; nothing changes */
    double before = get1(b, "w", 0);
    {
        wf_tensor *q = vec(WF_F64, K, (double[]){1, 2, 3});
        const char *names[1] = {"not_w"};
        CHECK_OK(wf_safetensors_write(other, 1, names, &q, NULL));
        wf_tensor_free(q);
        CHECK_ERR(wf_session_restore(b, other), WF_NOT_FOUND, "has no tensor for variable 'w'");
        CHECK(get1(b, "w", 0) == before);
        /* right names, wrong shape */
        wf_tensor *w4 = vec(WF_F64, 4, (double[]){1, 2, 3, 4}), *b1 = vec(WF_F64, 1, (double[]){0});
        const char *n2[2] = {"w", "b"};
        wf_tensor *t2[2] = {w4, b1};
        CHECK_OK(wf_safetensors_write(other, 2, n2, t2, NULL));
        CHECK_ERR(wf_session_restore(b, other), WF_INVALID_ARGUMENT, "variable 'w' is f64[3] but the value is f64[4]");
        CHECK(get1(b, "w", 0) == before);
        /* an extra tensor */
        wf_tensor *w3 = vec(WF_F64, K, (double[]){1, 2, 3});
        const char *n3[3] = {"w", "b", "extra"};
        wf_tensor *t3[3] = {w3, b1, b1};
        CHECK_OK(wf_safetensors_write(other, 3, n3, t3, NULL));
        CHECK_ERR(wf_session_restore(b, other), WF_INVALID_ARGUMENT, "tensor 'extra' is not a variable");
        CHECK(get1(b, "w", 0) == before);
        wf_tensor_free(w4);
        wf_tensor_free(w3);
        wf_tensor_free(b1);
    }
    /* a truncated checkpoint */
    FILE *in = fopen(path, "rb");
    FILE *out = fopen(trunc, "wb");
    CHECK(in && out);
    if (in && out) {
        char buf[4096];
        size_t n = fread(buf, 1, sizeof buf, in);
        fwrite(buf, 1, n > 10 ? n - 10 : n, out);
    }
    if (in) fclose(in);
    if (out) fclose(out);
    wf_status *st = wf_session_restore(b, trunc);
    CHECK(st != NULL);
    if (st) CHECK_STR_CONTAINS(wf_status_message(st), trunc);
    wf_status_free(st);
    CHECK(get1(b, "w", 0) == before);
    CHECK_ERR(wf_session_restore(b, "/nonexistent/x.safetensors"), WF_NOT_FOUND, "/nonexistent/x.safetensors");
    unlink(path);
    unlink(other);
    unlink(trunc);
    rmdir(dir);
    wf_tensor_free(xt);
    wf_tensor_free(tt);
    wf_session_free(a);
    wf_session_free(b);
    wf_graph_free(m.g);
}

int main(void)
{
    CHECK_OK(wf_context_new(NULL, &ctx));
    RUN_TEST(test_sgd_steps);
    RUN_TEST(test_reads_before_writes);
    RUN_TEST(test_checkpoint_resume);
    wf_context_free(ctx);
    return check_summary();
}
