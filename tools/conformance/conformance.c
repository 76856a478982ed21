/*
 * Runs ONNX backend node tests (ONNX's layout: model.onnx, test_data_set_N/input_K.pb and output_K.pb,
 * as tests/onnx/gen_node_tests.py writes them) through weft's importer and reports PASS, FAIL,
 * UNSUPPORTED or EXCLUDED per test, and the coverage ratio. Each test runs in a forked child, so a
 * crash or a hang inside weft fails that one test and never the runner.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weft/weft.h"

#define REASON_MAX 1536
#define MAX_OPS 256

typedef enum { R_PASS, R_FAIL, R_UNSUPPORTED, R_EXCLUDED, R_COUNT } result_kind;
static const char *const kind_name[R_COUNT] = {"PASS", "FAIL", "UNSUPPORTED", "EXCLUDED"};

typedef struct {
    result_kind kind;
    char reason[REASON_MAX];
} result;

typedef struct {
    const char *device;      /* NULL: no placement request */
    const char *list_out;
    const char *filter;
    const char *write_pass;
    const char *expect_pass;
    int quiet;
    int no_fork;
    int opt_level; /* --opt-level; -1: the session's default */
    int timeout_s;
} options;

/* ---- small helpers ---------------------------------------------------------------------------- */

static void set_reason(result *r, result_kind k, const char *fmt, ...)
{
    r->kind = k;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    /* Reasons go one per line into the summary and list files. */
    for (char *p = r->reason; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
}

/* snprintf for paths: a path too long for the buffer is cut and then simply not found. */
__attribute__((format(printf, 3, 4))) static void pathf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The whole file as a NUL-terminated string, or NULL. Caller frees. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

typedef struct {
    char **v;
    int n, cap;
} strvec;

static int strvec_push(strvec *sv, const char *s)
{
    if (sv->n == sv->cap) {
        int cap = sv->cap ? sv->cap * 2 : 64;
        char **nv = realloc(sv->v, sizeof *nv * (size_t)cap);
        if (!nv) return -1;
        sv->v = nv;
        sv->cap = cap;
    }
    if (!(sv->v[sv->n] = strdup(s))) return -1;
    sv->n++;
    return 0;
}

static void strvec_free(strvec *sv)
{
    for (int i = 0; i < sv->n; i++) free(sv->v[i]);
    free(sv->v);
    memset(sv, 0, sizeof *sv);
}

static int strvec_has(const strvec *sv, const char *s)
{
    for (int i = 0; i < sv->n; i++)
        if (!strcmp(sv->v[i], s)) return 1;
    return 0;
}

/* ---- finding tests -------------------------------------------------------------------------- */

static int is_test_dir(const char *dir)
{
    char p[4096];
    pathf(p, sizeof p, "%s/model.onnx", dir);
    if (exists(p)) return 1;
    pathf(p, sizeof p, "%s/skip.txt", dir);
    return exists(p);
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

/* DIR may be one test, a folder of tests (OUT/node) or the generator's output folder (OUT). */
static int collect(const char *dir, int depth, strvec *out)
{
    if (is_test_dir(dir)) return strvec_push(out, dir);
    if (depth > 2) return 0;
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, by_name);
    if (n < 0) {
        fprintf(stderr, "conformance: cannot read %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char p[4096];
        if (ents[i]->d_name[0] != '.' && rc == 0) {
            pathf(p, sizeof p, "%s/%s", dir, ents[i]->d_name);
            if (is_dir(p)) rc = collect(p, depth + 1, out);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

/* ---- what the test is about: info.txt (ops and I/O dtypes) and exclusion ------------------------ */

typedef struct {
    int n_ops;
    char domain[MAX_OPS][64], op[MAX_OPS][64];
    int has_string_io;
} test_info;

static void read_info(const char *dir, test_info *ti)
{
    memset(ti, 0, sizeof *ti);
    char p[4096];
    pathf(p, sizeof p, "%s/info.txt", dir);
    FILE *f = fopen(p, "r");
    if (!f) return;
    char line[256], a[64], b[64];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "op %63s %63s", a, b) == 2 && ti->n_ops < MAX_OPS) {
            strcpy(ti->domain[ti->n_ops], a);
            strcpy(ti->op[ti->n_ops], b);
            ti->n_ops++;
        } else if (sscanf(line, "io %63s", a) == 1 && !strcmp(a, "string")) {
            ti->has_string_io = 1;
        }
    }
    fclose(f);
}

/*
 * Tests outside what a tensor-graph runtime is meant to run, left out of the coverage ratio:
 *  - non-tensor values: sequences, maps, optionals (the generator's skip.txt; Sequence*, Optional*,
 *    SplitToSequence, ConcatFromSequence ops);
 *  - strings: string tensors, String*, RegexFullMatch, TfIdfVectorizer, LabelEncoder;
 *  - training: the ai.onnx.preview.training domain (Adagrad, Adam, Momentum, Gradient) and Dropout in
 *    training mode with a non-zero ratio, whose expected mask comes from numpy's RNG;
 *  - random ops (Bernoulli, Random*, Multinomial): no implementation can reproduce numpy's draws;
 *  - other domains (ai.onnx.ml, ai.onnx.preview): the importer reads the default domain only.
 * The loss ops (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) stay in: they are plain
 * default-domain inference ops.
 */
static const char *const excluded_name_prefixes[][2] = {
    {"test_sequence_", "sequences"},          {"test_optional_", "optionals"},
    {"test_split_to_sequence", "sequences"},  {"test_concat_from_sequence", "sequences"},
    {"test_string", "strings"},               {"test_strnorm", "strings"},
    {"test_regex_", "strings"},               {"test_tfidf", "strings (text features)"},
    {"test_ai_onnx_ml_", "non-default domain"}, {"test_adagrad", "training"},
    {"test_adam", "training"},                {"test_momentum", "training"},
    {"test_nesterov_momentum", "training"},   {"test_gradient", "training"},
    {"test_bernoulli", "random"},             {"test_random", "random"},
    {"test_multinomial", "random"},
};

static const char *const excluded_op_prefixes[][2] = {
    {"Sequence", "sequences"},       {"SplitToSequence", "sequences"}, {"ConcatFromSequence", "sequences"},
    {"Optional", "optionals"},       {"String", "strings"},            {"RegexFullMatch", "strings"},
    {"TfIdfVectorizer", "strings"},  {"LabelEncoder", "strings"},      {"Gradient", "training"},
    {"Bernoulli", "random"},         {"RandomUniform", "random"},      {"RandomNormal", "random"},
    {"Multinomial", "random"},
};

static const char *exclusion(const char *dir, const test_info *ti, char *buf, size_t cap)
{
    const char *name = base_name(dir);
    char p[4096];
    pathf(p, sizeof p, "%s/skip.txt", dir);
    char *skip = read_text(p);
    if (skip) {
        snprintf(buf, cap, "%s", skip);
        free(skip);
        return buf;
    }
    for (size_t i = 0; i < sizeof excluded_name_prefixes / sizeof *excluded_name_prefixes; i++)
        if (!strncmp(name, excluded_name_prefixes[i][0], strlen(excluded_name_prefixes[i][0]))) {
            snprintf(buf, cap, "%s (name %s*)", excluded_name_prefixes[i][1], excluded_name_prefixes[i][0]);
            return buf;
        }
    if (!strncmp(name, "test_training_dropout", 21) && !strstr(name, "zero_ratio")) {
        snprintf(buf, cap, "training (Dropout with a random mask)");
        return buf;
    }
    for (int k = 0; k < ti->n_ops; k++) {
        if (strcmp(ti->domain[k], "ai.onnx")) {
            snprintf(buf, cap, "%s (op %s of domain %s)",
                     strstr(ti->domain[k], "training") ? "training" : "non-default domain", ti->op[k],
                     ti->domain[k]);
            return buf;
        }
        for (size_t i = 0; i < sizeof excluded_op_prefixes / sizeof *excluded_op_prefixes; i++)
            if (!strncmp(ti->op[k], excluded_op_prefixes[i][0], strlen(excluded_op_prefixes[i][0]))) {
                snprintf(buf, cap, "%s (op %s)", excluded_op_prefixes[i][1], ti->op[k]);
                return buf;
            }
    }
    if (ti->has_string_io) {
        snprintf(buf, cap, "strings (string input or output)");
        return buf;
    }
    return NULL;
}

/* ---- comparing one output ----------------------------------------------------------------------- */

static int is_float(wf_dtype t) { return t == WF_F32 || t == WF_F64 || t == WF_F16 || t == WF_BF16; }

static double elem(const wf_tensor *t, int64_t i)
{
    const void *d = wf_tensor_data(t);
    switch (wf_tensor_dtype(t)) {
    case WF_F32: return ((const float *)d)[i];
    case WF_F64: return ((const double *)d)[i];
    case WF_F16: return wf_f16_to_f32(((const uint16_t *)d)[i]);
    case WF_BF16: return wf_bf16_to_f32(((const uint16_t *)d)[i]);
    case WF_I8: return ((const int8_t *)d)[i];
    case WF_U8: return ((const uint8_t *)d)[i];
    case WF_I16: return ((const int16_t *)d)[i];
    case WF_I32: return ((const int32_t *)d)[i];
    case WF_BOOL: return ((const uint8_t *)d)[i] != 0;
    default: return 0;
    }
}

static void shape_str(const wf_tensor *t, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < wf_tensor_rank(t) && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)wf_tensor_dims(t)[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static void index_str(const wf_tensor *t, int64_t flat, char *buf, size_t cap)
{
    int r = wf_tensor_rank(t);
    int64_t idx[WF_MAX_RANK];
    for (int i = r - 1; i >= 0; i--) {
        int64_t d = wf_tensor_dims(t)[i];
        idx[i] = d ? flat % d : 0;
        flat = d ? flat / d : 0;
    }
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < r && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)idx[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* numpy.testing.assert_allclose: |got - want| <= atol + rtol * |want|, NaN matches NaN, infinities
 * must be equal; integers and bools exactly. Shape and dtype must match as ONNX's runner requires.
 * Returns 0 when equal, else writes why into msg. */
static int compare(const wf_tensor *got, const wf_tensor *want, double rtol, double atol, char *msg, size_t cap)
{
    char gs[256], ws[256];
    if (wf_tensor_dtype(got) != wf_tensor_dtype(want)) {
        snprintf(msg, cap, "dtype %s, expected %s", wf_dtype_name(wf_tensor_dtype(got)),
                 wf_dtype_name(wf_tensor_dtype(want)));
        return 1;
    }
    shape_str(got, gs, sizeof gs);
    shape_str(want, ws, sizeof ws);
    if (wf_tensor_rank(got) != wf_tensor_rank(want) || strcmp(gs, ws)) {
        snprintf(msg, cap, "shape %s, expected %s", gs, ws);
        return 1;
    }
    wf_dtype t = wf_tensor_dtype(want);
    int64_t n = wf_tensor_size(want), bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok;
        if (t == WF_I64) {
            ok = ((const int64_t *)wf_tensor_data(got))[i] == ((const int64_t *)wf_tensor_data(want))[i];
        } else if (!is_float(t)) {
            ok = elem(got, i) == elem(want, i);
        } else {
            double a = elem(got, i), b = elem(want, i);
            if (isnan(a) || isnan(b)) ok = isnan(a) && isnan(b);
            else if (isinf(a) || isinf(b)) ok = a == b;
            else ok = fabs(a - b) <= atol + rtol * fabs(b);
            if (!ok && !isnan(a) && !isnan(b) && fabs(a - b) > worst) worst = fabs(a - b);
        }
        if (!ok) {
            if (first < 0) first = i;
            bad++;
        }
    }
    if (!bad) return 0;
    char at[256];
    index_str(want, first, at, sizeof at);
    if (t == WF_I64)
        snprintf(msg, cap, "%lld of %lld elements differ, first at %s: got %lld, expected %lld", (long long)bad,
                 (long long)n, at, (long long)((const int64_t *)wf_tensor_data(got))[first],
                 (long long)((const int64_t *)wf_tensor_data(want))[first]);
    else if (!is_float(t))
        snprintf(msg, cap, "%lld of %lld elements differ, first at %s: got %.17g, expected %.17g", (long long)bad,
                 (long long)n, at, elem(got, first), elem(want, first));
    else
        snprintf(msg, cap, "%lld of %lld elements differ (max |diff| %.3g, rtol %g, atol %g), "
                 "first at %s: got %.9g, expected %.9g", (long long)bad, (long long)n, worst, rtol, atol, at,
                 elem(got, first), elem(want, first));
    return 1;
}

/* ---- running one test (in the child) ------------------------------------------------------------ */

/* A weft status as a result: UNIMPLEMENTED (no such op, attribute, dtype or kernel) is unsupported,
 * anything else a failure. Frees s. */
static void from_status(result *r, wf_status *s, const char *what)
{
    /* with --device placement is strict: a node without a kernel on that device is a gap of the
     * device, counted with the unsupported tests, not a wrong result */
    bool no_kernel = strstr(wf_status_message(s), "no supported kernel for") != NULL;
    set_reason(r, wf_status_code(s) == WF_UNIMPLEMENTED || no_kernel ? R_UNSUPPORTED : R_FAIL, "%s: %s: %s", what,
               wf_code_name(wf_status_code(s)), wf_status_message(s));
    wf_status_free(s);
}

static void read_tolerance(const char *dir, double *rtol, double *atol)
{
    char p[4096];
    *rtol = 1e-3; /* ONNX's defaults for cases that do not set them */
    *atol = 1e-7;
    pathf(p, sizeof p, "%s/tolerance.txt", dir);
    FILE *f = fopen(p, "r");
    if (!f) return;
    double r, a;
    if (fscanf(f, "%lf %lf", &r, &a) == 2) {
        *rtol = r;
        *atol = a;
    }
    fclose(f);
}

static int count_files(const char *dir, const char *prefix)
{
    char p[4096];
    int n = 0;
    for (;; n++) {
        pathf(p, sizeof p, "%s/%s_%d.pb", dir, prefix, n);
        if (!exists(p)) return n;
    }
}

static void run_data_set(wf_session *sess, const wf_onnx_model *m, const char *ds, double rtol, double atol,
                         result *r)
{
    int n_in = count_files(ds, "input"), n_out = count_files(ds, "output");
    int n_model_out = wf_onnx_num_outputs(m);
    /* ONNX's rule: input_j feeds the j-th graph input that is not backed by an initializer. */
    int n_feedable = 0;
    for (int i = 0; i < wf_onnx_num_inputs(m); i++) n_feedable += !wf_onnx_input(m, i)->has_default;
    if (n_in > n_feedable) {
        set_reason(r, R_FAIL, "%s: %d inputs given, the model has %d to feed", base_name(ds), n_in, n_feedable);
        return;
    }
    if (n_out != n_model_out) {
        set_reason(r, R_FAIL, "%s: %d expected outputs, the model has %d", base_name(ds), n_out, n_model_out);
        return;
    }
    wf_feed *feeds = calloc((size_t)n_in + 1, sizeof *feeds);
    wf_tensor **in = calloc((size_t)n_in + 1, sizeof *in);
    wf_tensor **want = calloc((size_t)n_out + 1, sizeof *want);
    wf_tensor **got = calloc((size_t)n_out + 1, sizeof *got);
    wf_output *fetch = calloc((size_t)n_out + 1, sizeof *fetch);
    if (!feeds || !in || !want || !got || !fetch) {
        set_reason(r, R_FAIL, "out of host memory in the runner");
        goto done;
    }
    char p[4096], what[4200];
    for (int j = 0, i = 0; j < n_in; j++, i++) {
        while (wf_onnx_input(m, i)->has_default) i++;
        pathf(p, sizeof p, "%s/input_%d.pb", ds, j);
        wf_status *s = wf_onnx_read_tensor(p, &in[j]);
        if (s) {
            snprintf(what, sizeof what, "%s/input_%d.pb", base_name(ds), j);
            from_status(r, s, what);
            goto done;
        }
        feeds[j].output = wf_onnx_input(m, i)->output;
        feeds[j].tensor = in[j];
    }
    for (int k = 0; k < n_out; k++) {
        pathf(p, sizeof p, "%s/output_%d.pb", ds, k);
        wf_status *s = wf_onnx_read_tensor(p, &want[k]);
        if (s) {
            snprintf(what, sizeof what, "%s/output_%d.pb", base_name(ds), k);
            from_status(r, s, what);
            goto done;
        }
        fetch[k] = wf_onnx_output(m, k)->output;
    }
    wf_status *s = wf_session_run(sess, feeds, n_in, fetch, n_out, got, NULL);
    if (s) {
        snprintf(what, sizeof what, "%s: run", base_name(ds));
        from_status(r, s, what);
        goto done;
    }
    for (int k = 0; k < n_out; k++) {
        char msg[1024];
        if (compare(got[k], want[k], rtol, atol, msg, sizeof msg)) {
            set_reason(r, R_FAIL, "%s: output %d '%s': %s", base_name(ds), k, wf_onnx_output(m, k)->name, msg);
            goto done;
        }
    }
done:
    for (int j = 0; in && j < n_in; j++) wf_tensor_free(in[j]);
    for (int k = 0; want && k < n_out; k++) wf_tensor_free(want[k]);
    for (int k = 0; got && k < n_out; k++) wf_tensor_free(got[k]);
    free(feeds);
    free(in);
    free(want);
    free(got);
    free(fetch);
}

static void run_test(const char *dir, const options *o, result *r)
{
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_onnx_model *m = NULL;
    wf_session *sess = NULL;
    wf_status *s;
    char p[4096];
    set_reason(r, R_PASS, "");
    if ((s = wf_context_new(NULL, &ctx))) {
        from_status(r, s, "context");
        goto done;
    }
    if ((s = wf_graph_new(&g))) {
        from_status(r, s, "graph");
        goto done;
    }
    if (o->device) {
        char spec[128];
        snprintf(spec, sizeof spec, strchr(o->device, ':') || strchr(o->device, '/') ? "%s" : "/device:%s:0",
                 o->device);
        if ((s = wf_graph_set_device(g, spec))) {
            from_status(r, s, "device");
            goto done;
        }
    }
    pathf(p, sizeof p, "%s/model.onnx", dir);
    if ((s = wf_onnx_load(p, g, &m))) {
        from_status(r, s, "load");
        goto done;
    }
    wf_session_options so;
    wf_session_options_init(&so);
    so.strict_placement = o->device != NULL;
    if (o->opt_level >= 0) so.opt_level = o->opt_level;
    if ((s = wf_session_new(ctx, g, &so, &sess))) {
        from_status(r, s, "session");
        goto done;
    }
    double rtol, atol;
    read_tolerance(dir, &rtol, &atol);
    int n_sets = 0;
    for (; r->kind == R_PASS; n_sets++) {
        pathf(p, sizeof p, "%s/test_data_set_%d", dir, n_sets);
        if (!is_dir(p)) break;
        run_data_set(sess, m, p, rtol, atol, r);
    }
    if (n_sets == 0 && r->kind == R_PASS) set_reason(r, R_FAIL, "no test_data_set_0 folder");
done:
    wf_session_free(sess);
    wf_onnx_model_free(m);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* ---- the fork harness --------------------------------------------------------------------------- */

/* Runs the test in a child process: weft's thread pools are created there and never in the runner,
 * so forking is safe, and a signal or a hang ends only the child. */
static void run_isolated(const char *dir, const options *o, result *r)
{
    if (o->no_fork) {
        run_test(dir, o, r);
        return;
    }
    int fd[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fd)) {
        set_reason(r, R_FAIL, "runner: pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        set_reason(r, R_FAIL, "runner: fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        if (o->timeout_s > 0) alarm((unsigned)o->timeout_s);
        result cr;
        run_test(dir, o, &cr);
        char buf[REASON_MAX + 2];
        int n = snprintf(buf, sizeof buf, "%c%s", '0' + (int)cr.kind, cr.reason);
        if (n > (int)sizeof buf - 1) n = (int)sizeof buf - 1;
        for (int off = 0; off < n;) {
            ssize_t w = write(fd[1], buf + off, (size_t)(n - off));
            if (w <= 0) break;
            off += (int)w;
        }
        close(fd[1]);
        _exit(0);
    }
    close(fd[1]);
    char buf[REASON_MAX + 2];
    size_t n = 0;
    for (;;) {
        ssize_t got = read(fd[0], buf + n, sizeof buf - 1 - n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        n += (size_t)got;
        if (n == sizeof buf - 1) break;
    }
    close(fd[0]);
    buf[n] = 0;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (sig == SIGALRM)
            set_reason(r, R_FAIL, "timed out after %d s", o->timeout_s);
        else
            set_reason(r, R_FAIL, "crashed: signal %d (%s)", sig, strsignal(sig));
    } else if (n == 0 || buf[0] < '0' || buf[0] >= '0' + R_COUNT) {
        set_reason(r, R_FAIL,
                   "the test process exited with status %d without a result (a sanitizer report on stderr?)",
                   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else {
        r->kind = (result_kind)(buf[0] - '0');
        size_t len = n - 1 < sizeof r->reason - 1 ? n - 1 : sizeof r->reason - 1;
        memcpy(r->reason, buf + 1, len);
        r->reason[len] = 0;
    }
}

/* Weft's load errors start with the model's path; the test's name already says which model it is. */
static void strip_model_path(char *reason, const char *dir)
{
    char pre[4200];
    pathf(pre, sizeof pre, "%s/model.onnx: ", dir);
    size_t n = strlen(pre);
    for (char *p = strstr(reason, pre); p; p = strstr(p, pre)) memmove(p, p + n, strlen(p + n) + 1);
}

/* ---- tallies ------------------------------------------------------------------------------------ */

typedef struct {
    char name[96];
    int count;
} tally;

typedef struct {
    tally *v;
    int n, cap;
} tallies;

static void tally_add(tallies *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].name, name)) {
            t->v[i].count++;
            return;
        }
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 32;
        tally *nv = realloc(t->v, sizeof *nv * (size_t)cap);
        if (!nv) return;
        t->v = nv;
        t->cap = cap;
    }
    snprintf(t->v[t->n].name, sizeof t->v[t->n].name, "%s", name);
    t->v[t->n++].count = 1;
}

static int by_count(const void *a, const void *b)
{
    const tally *x = a, *y = b;
    if (x->count != y->count) return y->count - x->count;
    return strcmp(x->name, y->name);
}

static int word_in(const char *hay, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(hay, word); p; p = strstr(p + 1, word)) {
        int left = p == hay || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int right = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        if (left && right) return 1;
    }
    return 0;
}

/* What an unsupported test lacks: the element type the message names ("dtype UINT32"), else the
 * test's ops that the message names, else "(other)". */
static void tally_unsupported(tallies *t, const test_info *ti, const char *reason)
{
    static const char *const dtype_marks[] = {"element type ", "data type "};
    for (size_t i = 0; i < sizeof dtype_marks / sizeof *dtype_marks; i++) {
        const char *p = strstr(reason, dtype_marks[i]);
        if (p) {
            char what[96];
            p += strlen(dtype_marks[i]);
            snprintf(what, sizeof what, "dtype %.*s", (int)strcspn(p, " ,;:)"), p);
            tally_add(t, what);
            return;
        }
    }
    int found = 0;
    for (int k = 0; k < ti->n_ops; k++)
        if (word_in(reason, ti->op[k])) {
            tally_add(t, ti->op[k]);
            found = 1;
        }
    if (!found) tally_add(t, "(other)");
}

/* ---- main --------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: conformance [OPTIONS] DIR...\n"
            "Runs ONNX backend node tests (folders with model.onnx and test_data_set_N/) through weft.\n"
            "DIR is one test folder or a folder of them (searched two levels deep).\n"
            "  --device NAME          request this device for every node (CPU, GPU:1, /device:CPU:0), strictly:\n"
            "                         a node without a kernel there makes the test unsupported\n"
            "  --filter SUBSTR        only tests whose name contains SUBSTR\n"
            "  --list-out FILE        write failing and unsupported tests with their reasons\n"
            "  --write-pass-list FILE write the names of the passing tests\n"
            "  --expect-pass FILE     run only the tests FILE lists; exit 1 if any does not pass\n"
            "  --timeout SECONDS      per test (default 120)\n"
            "  --opt-level N          the sessions' graph optimisation (default: the library's)\n"
            "  --no-fork              run tests in this process (for debuggers; a crash ends the run)\n"
            "  --quiet                print the summary only\n");
}

static int read_name_list(const char *path, strvec *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "conformance: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *s = line, *e;
        while (*s == ' ' || *s == '\t') s++;
        for (e = s + strlen(s); e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '); e--) {}
        *e = 0;
        if (*s && *s != '#' && strvec_push(out, s)) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    options o = {0};
    o.timeout_s = 120;
    o.opt_level = -1;
    strvec dirs = {0}, tests = {0}, expect = {0}, passed_names = {0};
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--device") && more) o.device = argv[++i];
        else if (!strcmp(a, "--list-out") && more) o.list_out = argv[++i];
        else if (!strcmp(a, "--filter") && more) o.filter = argv[++i];
        else if (!strcmp(a, "--write-pass-list") && more) o.write_pass = argv[++i];
        else if (!strcmp(a, "--expect-pass") && more) o.expect_pass = argv[++i];
        else if (!strcmp(a, "--timeout") && more) o.timeout_s = atoi(argv[++i]);
        else if (!strcmp(a, "--opt-level") && more) o.opt_level = atoi(argv[++i]);
        else if (!strcmp(a, "--no-fork")) o.no_fork = 1;
        else if (!strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-') {
            fprintf(stderr, "conformance: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (strvec_push(&dirs, a)) return 2;
    }
    if (!dirs.n) {
        usage(stderr);
        return 2;
    }
    for (i = 0; i < dirs.n; i++)
        if (collect(dirs.v[i], 0, &tests)) return 2;
    if (o.expect_pass && read_name_list(o.expect_pass, &expect)) return 2;

    FILE *list = NULL;
    if (o.list_out && !(list = fopen(o.list_out, "w"))) {
        fprintf(stderr, "conformance: cannot write %s: %s\n", o.list_out, strerror(errno));
        return 2;
    }
    int count[R_COUNT] = {0}, regressed = 0;
    tallies unsupported_ops = {0}, excluded_why = {0};
    for (i = 0; i < tests.n; i++) {
        const char *dir = tests.v[i], *name = base_name(dir);
        if (o.filter && !strstr(name, o.filter)) continue;
        if (o.expect_pass && !strvec_has(&expect, name)) continue;
        test_info ti;
        read_info(dir, &ti);
        result r;
        char why[REASON_MAX];
        const char *ex = exclusion(dir, &ti, why, sizeof why);
        if (ex) set_reason(&r, R_EXCLUDED, "%s", ex);
        else run_isolated(dir, &o, &r);
        strip_model_path(r.reason, dir);
        count[r.kind]++;
        if (r.kind == R_PASS) strvec_push(&passed_names, name);
        if (r.kind == R_UNSUPPORTED) tally_unsupported(&unsupported_ops, &ti, r.reason);
        if (r.kind == R_EXCLUDED) {
            char cat[96];
            size_t len = strcspn(r.reason, ":(");
            if (len >= sizeof cat) len = sizeof cat - 1;
            memcpy(cat, r.reason, len);
            cat[len] = 0;
            for (size_t L = strlen(cat); L && cat[L - 1] == ' '; L--) cat[L - 1] = 0;
            tally_add(&excluded_why, cat);
        }
        if (!o.quiet) {
            if (r.kind == R_PASS) printf("PASS %s\n", name);
            else printf("%s %s: %s\n", kind_name[r.kind], name, r.reason);
            fflush(stdout);
        }
        if (list && (r.kind == R_FAIL || r.kind == R_UNSUPPORTED))
            fprintf(list, "%s %s: %s\n", kind_name[r.kind], name, r.reason);
        if (o.expect_pass && r.kind != R_PASS) {
            fprintf(stderr, "REGRESSED %s: %s %s\n", name, kind_name[r.kind], r.reason);
            regressed++;
        }
    }
    if (o.expect_pass)
        for (i = 0; i < expect.n; i++) {
            int found = 0;
            for (int k = 0; k < tests.n && !found; k++) found = !strcmp(base_name(tests.v[k]), expect.v[i]);
            if (!found && (!o.filter || strstr(expect.v[i], o.filter))) {
                fprintf(stderr, "REGRESSED %s: no such test folder\n", expect.v[i]);
                regressed++;
            }
        }
    if (list) fclose(list);

    int total = count[R_PASS] + count[R_FAIL] + count[R_UNSUPPORTED] + count[R_EXCLUDED];
    int supported = count[R_PASS] + count[R_FAIL], in_scope = total - count[R_EXCLUDED];
    printf("passed %d, failed %d, unsupported %d, excluded %d\n", count[R_PASS], count[R_FAIL],
           count[R_UNSUPPORTED], count[R_EXCLUDED]);
    if (!o.expect_pass)
        printf("coverage %.1f%% (supported %d = passed + failed, of %d = total %d - excluded %d)\n",
               in_scope ? 100.0 * supported / in_scope : 0.0, supported, in_scope, total, count[R_EXCLUDED]);
    if (excluded_why.n) {
        qsort(excluded_why.v, (size_t)excluded_why.n, sizeof *excluded_why.v, by_count);
        printf("excluded:");
        for (i = 0; i < excluded_why.n; i++)
            printf("%s %s %d", i ? "," : "", excluded_why.v[i].name, excluded_why.v[i].count);
        printf("\n");
    }
    if (unsupported_ops.n) {
        qsort(unsupported_ops.v, (size_t)unsupported_ops.n, sizeof *unsupported_ops.v, by_count);
        printf("unsupported, by op (tests):");
        for (i = 0; i < unsupported_ops.n && i < 40; i++)
            printf("%s %s %d", i ? "," : "", unsupported_ops.v[i].name, unsupported_ops.v[i].count);
        printf(unsupported_ops.n > 40 ? ", ...\n" : "\n");
    }
    if (o.write_pass) {
        FILE *f = fopen(o.write_pass, "w");
        if (!f) {
            fprintf(stderr, "conformance: cannot write %s: %s\n", o.write_pass, strerror(errno));
            return 2;
        }
        fprintf(f, "# ONNX backend node tests that weft passes; `conformance --expect-pass` fails if one stops\n"
                   "# passing. Regenerate with scripts/conformance.sh --write-pass-list.\n");
        for (i = 0; i < passed_names.n; i++) fprintf(f, "%s\n", passed_names.v[i]);
        fclose(f);
    }
    if (o.expect_pass)
        printf("expect-pass: %d of %d listed tests pass, %d regressed\n", expect.n - regressed, expect.n,
               regressed);
    free(unsupported_ops.v);
    free(excluded_why.v);
    strvec_free(&dirs);
    strvec_free(&tests);
    strvec_free(&expect);
    strvec_free(&passed_names);
    return regressed ? 1 : 0;
}
