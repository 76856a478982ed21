/*
 * `weft run MODEL.onnx`: import a model, feed inputs from .npy or ONNX TensorProto (.pb) files (or
 * random values), run it, print and save the outputs, and time repeated runs; --place, --explain and
 * --profile request devices per node, show why each node runs where it does, and write a Chrome trace.
 * `weft inspect` prints what the model holds without importing it.
 */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static wf_status *read_input(const char *path, wf_tensor **out)
{
    if (ends_with(path, ".pb")) return wf_onnx_read_tensor(path, out);
    return wf_npy_read(path, out);
}

static void shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && off < n; i++) {
        if (dims[i] < 0) off += (size_t)snprintf(buf + off, n - off, "%s?", i ? "," : "");
        else off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? "," : "", (long long)dims[i]);
    }
    if (off < n) snprintf(buf + off, n - off, "]");
}

static double elem(const wf_tensor *t, int64_t i)
{
    const void *p = wf_tensor_data(t);
    switch (wf_tensor_dtype(t)) {
    case WF_F32: return ((const float *)p)[i];
    case WF_F64: return ((const double *)p)[i];
    case WF_F16: return wf_f16_to_f32(((const uint16_t *)p)[i]);
    case WF_BF16: return wf_bf16_to_f32(((const uint16_t *)p)[i]);
    case WF_I8: return ((const int8_t *)p)[i];
    case WF_U8: case WF_BOOL: return ((const uint8_t *)p)[i];
    case WF_I16: return ((const int16_t *)p)[i];
    case WF_I32: return ((const int32_t *)p)[i];
    case WF_I64: return (double)((const int64_t *)p)[i];
    default: return 0;
    }
}

/* Deterministic values: uniform [0,1) for floats, small non-negative integers, alternating bools. */
static wf_status *random_input(const wf_onnx_value *v, wf_tensor **out)
{
    int64_t dims[WF_MAX_RANK];
    int rank = v->rank < 0 ? 0 : v->rank;
    for (int i = 0; i < rank; i++) dims[i] = v->dims[i] < 0 ? 1 : v->dims[i];
    wf_tensor *t;
    wf_status *s = wf_tensor_new(v->dtype, rank, dims, NULL, &t);
    if (s) return s;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < wf_tensor_size(t); i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(state >> 11) / 9007199254740992.0;
        void *p = wf_tensor_data(t);
        switch (v->dtype) {
        case WF_F32: ((float *)p)[i] = (float)u; break;
        case WF_F64: ((double *)p)[i] = u; break;
        case WF_F16: ((uint16_t *)p)[i] = wf_f32_to_f16((float)u); break;
        case WF_BF16: ((uint16_t *)p)[i] = wf_f32_to_bf16((float)u); break;
        case WF_BOOL: ((uint8_t *)p)[i] = i & 1; break;
        case WF_I8: ((int8_t *)p)[i] = (int8_t)(u * 10); break;
        case WF_U8: ((uint8_t *)p)[i] = (uint8_t)(u * 10); break;
        case WF_I16: ((int16_t *)p)[i] = (int16_t)(u * 10); break;
        case WF_I32: ((int32_t *)p)[i] = (int32_t)(u * 10); break;
        case WF_I64: ((int64_t *)p)[i] = (int64_t)(u * 10); break;
        default: break;
        }
    }
    *out = t;
    return NULL;
}

static void safe_name(const char *name, char *out, size_t n)
{
    size_t k = 0;
    for (; name[k] && k + 1 < n; k++) {
        char ch = name[k];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '_' || ch == '-';
        out[k] = ok ? ch : '_';
    }
    out[k] = 0;
}

static void run_usage(FILE *f)
{
    fprintf(f, "usage: weft run MODEL.onnx [--input NAME=FILE.npy|FILE.pb]... [--random-inputs]\n"
               "                [--output-dir DIR] [--iterations N] [--threads N] [--device SPEC]\n"
               "                [--strict-placement] [--memory-limit SPEC=SIZE]... [--log-device-placement]\n"
               "                [--place PATTERN=SPEC]... [--explain] [--calibrate] [--profile FILE.json]\n"
               "  --place: request device SPEC for the nodes whose name matches the glob PATTERN, or whose op\n"
               "           type matches it when written op:TYPE; repeatable, the first matching --place wins\n");
}

/* --place PATTERN=SPEC: the first pattern that matches a node gives its device request. A pattern
 * that matches no node at all is an error: a typo would otherwise silently place nothing. */
static int apply_places(wf_graph *g, const char **places, int n_places, const char *model_path, wf_status **st)
{
    int *hits = calloc((size_t)n_places + 1, sizeof *hits);
    if (!hits) {
        fprintf(stderr, "weft run: out of memory\n");
        return 1;
    }
    for (int k = 0; k < n_places; k++)
        if (!strchr(places[k], '=') || places[k][0] == '=') {
            fprintf(stderr, "weft run: --place wants PATTERN=SPEC (e.g. 'op:MatMul=OPENCL:0'), got '%s'\n", places[k]);
            free(hits);
            return 2;
        }
    for (int i = 0; i < wf_graph_num_nodes(g); i++) {
        wf_node *n = wf_graph_node(g, i);
        int won = -1;
        for (int k = 0; k < n_places; k++) {
            const char *eq = strrchr(places[k], '=');
            char pat[1024];
            snprintf(pat, sizeof pat, "%.*s", (int)(eq - places[k]), places[k]);
            bool by_op = !strncmp(pat, "op:", 3);
            if (fnmatch(by_op ? pat + 3 : pat, by_op ? wf_node_op(n) : wf_node_name(n), 0) != 0) continue;
            hits[k]++;
            if (won < 0) won = k;
        }
        if (won >= 0 && (*st = wf_node_set_device(n, strrchr(places[won], '=') + 1))) {
            free(hits);
            return 1;
        }
    }
    for (int k = 0; k < n_places; k++)
        if (!hits[k]) {
            const char *eq = strrchr(places[k], '=');
            fprintf(stderr, "weft run: %s: --place pattern '%.*s' matches no node%s\n", model_path,
                    (int)(eq - places[k]), places[k],
                    strncmp(places[k], "op:", 3) ? " name (write op:TYPE to match op types)" : "'s op type");
            free(hits);
            return 2;
        }
    free(hits);
    return 0;
}

/* "512M", "2G", "1048576" */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

static void list_inputs(const wf_onnx_model *m, FILE *f)
{
    fprintf(f, "the model's inputs:\n");
    for (int i = 0; i < wf_onnx_num_inputs(m); i++) {
        const wf_onnx_value *v = wf_onnx_input(m, i);
        char sh[256];
        if (v->rank >= 0) shape_str(v->rank, v->dims, sh, sizeof sh);
        else snprintf(sh, sizeof sh, "[?...]");
        fprintf(f, "  %s: %s%s%s\n", v->name, wf_dtype_name(v->dtype), sh, v->has_default ? " (optional: has a default)" : "");
    }
}

int cmd_run(int argc, char **argv)
{
    const char *model_path = NULL, *out_dir = NULL, *device = NULL;
    const char *profile_path = NULL;
    int iterations = 10, threads = 0, random_inputs = 0, n_specs = 0, strict = 0, log_placement = 0, n_limits = 0;
    int n_places = 0, explain = 0, calibrate = 0;
    const char **specs = calloc((size_t)argc + 1, sizeof *specs);
    const char **limits = calloc((size_t)argc + 1, sizeof *limits);
    const char **places = calloc((size_t)argc + 1, sizeof *places);
    if (!specs || !limits || !places) {
        free(specs);
        free(limits);
        free(places);
        return 1;
    }
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc) specs[n_specs++] = argv[++i];
        else if (!strcmp(argv[i], "--random-inputs")) random_inputs = 1;
        else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--strict-placement")) strict = 1;
        else if (!strcmp(argv[i], "--log-device-placement")) log_placement = 1;
        else if (!strcmp(argv[i], "--memory-limit") && i + 1 < argc) limits[n_limits++] = argv[++i];
        else if (!strcmp(argv[i], "--place") && i + 1 < argc) places[n_places++] = argv[++i];
        else if (!strcmp(argv[i], "--explain")) explain = 1;
        else if (!strcmp(argv[i], "--calibrate")) calibrate = 1;
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc) profile_path = argv[++i];
        else if (argv[i][0] != '-' && !model_path) model_path = argv[i];
        else {
            fprintf(stderr, "weft run: unknown option '%s'\n", argv[i]);
            run_usage(stderr);
            free(specs);
            free(limits);
            free(places);
            return 2;
        }
    }
    if (!model_path || iterations < 1 || threads < 0) {
        run_usage(stderr);
        free(specs);
        free(limits);
        free(places);
        return 2;
    }
    wf_context_options co;
    wf_context_options_init(&co);
    co.inter_op_threads = co.intra_op_threads = threads;
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_onnx_model *m = NULL;
    wf_session *sess = NULL;
    wf_feed *feeds = NULL;
    wf_output *fetches = NULL;
    wf_tensor **outs = NULL;
    wf_trace *trace = NULL;
    double *times = NULL;
    int n_feeds = 0, n_out = 0, rc = 1;
    wf_status *s = wf_context_new(&co, &ctx);
    /* measured device figures for the placer, saved for later runs (weft devices --calibrate) */
    if (!s && calibrate) s = wf_context_calibrate(ctx, NULL, NULL);
    for (int k = 0; !s && k < n_limits; k++) {
        const char *eq = strrchr(limits[k], '=');
        uint64_t bytes;
        if (!eq || parse_size(eq + 1, &bytes)) {
            fprintf(stderr, "weft run: --memory-limit wants SPEC=SIZE (e.g. OPENCL:0=256M), got '%s'\n", limits[k]);
            rc = 2;
            goto out;
        }
        char spec[256];
        snprintf(spec, sizeof spec, "%.*s", (int)(eq - limits[k]), limits[k]);
        s = wf_context_set_memory_limit(ctx, spec, bytes);
    }
    if (!s) s = wf_graph_new(&g);
    if (!s) s = wf_onnx_load(model_path, g, &m);
    if (s) goto out;
    if (n_places && (rc = apply_places(g, places, n_places, model_path, &s)) != 0) goto out;
    rc = 1;
    int n_in = wf_onnx_num_inputs(m);
    n_out = wf_onnx_num_outputs(m);
    feeds = calloc((size_t)n_in + 1, sizeof *feeds);
    fetches = calloc((size_t)n_out + 1, sizeof *fetches);
    outs = calloc((size_t)n_out + 1, sizeof *outs);
    times = calloc((size_t)iterations, sizeof *times);
    if (!feeds || !fetches || !outs || !times) {
        fprintf(stderr, "weft run: out of memory\n");
        goto out;
    }
    /* --input NAME=FILE */
    for (int k = 0; k < n_specs; k++) {
        const char *eq = strchr(specs[k], '=');
        if (!eq) {
            fprintf(stderr, "weft run: --input wants NAME=FILE, got '%s'\n", specs[k]);
            rc = 2;
            goto out;
        }
        size_t nl = (size_t)(eq - specs[k]);
        int idx = -1;
        for (int i = 0; i < n_in; i++)
            if (strlen(wf_onnx_input(m, i)->name) == nl && !strncmp(wf_onnx_input(m, i)->name, specs[k], nl)) idx = i;
        if (idx < 0) {
            fprintf(stderr, "weft run: %s: the model has no input named '%.*s'\n", model_path, (int)nl, specs[k]);
            list_inputs(m, stderr);
            rc = 2;
            goto out;
        }
        const wf_onnx_value *v = wf_onnx_input(m, idx);
        wf_tensor *t;
        if ((s = read_input(eq + 1, &t))) goto out;
        feeds[n_feeds].output = v->output;
        feeds[n_feeds].tensor = t;
        n_feeds++;
        if (wf_tensor_dtype(t) != v->dtype) {
            fprintf(stderr, "weft run: %s: input '%s' has dtype %s, but the model expects %s\n", eq + 1, v->name,
                    wf_dtype_name(wf_tensor_dtype(t)), wf_dtype_name(v->dtype));
            goto out;
        }
        bool shape_ok = v->rank < 0 || v->has_default || v->rank == wf_tensor_rank(t);
        for (int d = 0; shape_ok && v->rank > 0 && !v->has_default && d < v->rank; d++)
            shape_ok = v->dims[d] < 0 || v->dims[d] == wf_tensor_dims(t)[d];
        if (!shape_ok) {
            char a[256], b[256];
            shape_str(wf_tensor_rank(t), wf_tensor_dims(t), a, sizeof a);
            shape_str(v->rank, v->dims, b, sizeof b);
            fprintf(stderr, "weft run: %s: input '%s' has shape %s, but the model expects %s\n", eq + 1, v->name, a, b);
            goto out;
        }
    }
    /* inputs not given: random, or an error listing what is expected */
    for (int i = 0; i < n_in; i++) {
        const wf_onnx_value *v = wf_onnx_input(m, i);
        bool given = false;
        for (int k = 0; k < n_feeds && !given; k++) given = feeds[k].output.node == v->output.node;
        if (given || v->has_default) continue;
        if (!random_inputs) {
            fprintf(stderr, "weft run: %s: input '%s' was not given (use --input NAME=FILE or --random-inputs)\n",
                    model_path, v->name);
            list_inputs(m, stderr);
            rc = 2;
            goto out;
        }
        wf_tensor *t;
        if ((s = random_input(v, &t))) goto out;
        feeds[n_feeds].output = v->output;
        feeds[n_feeds].tensor = t;
        n_feeds++;
    }
    for (int j = 0; j < n_out; j++) fetches[j] = wf_onnx_output(m, j)->output;
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = device;
    so.strict_placement = strict;
    if ((s = wf_session_new(ctx, g, &so, &sess))) goto out;
    if (log_placement) {
        char *text = NULL;
        if ((s = wf_session_placement(sess, feeds, n_feeds, fetches, n_out, &text))) goto out;
        /* TensorFlow's format on stderr: name: (Op): device — without our reasons */
        for (char *line = text; line && *line;) {
            char *nl = strchr(line, '\n');
            char *hash = strstr(line, "  # ");
            int len = (int)(hash && (!nl || hash < nl) ? hash - line : nl ? nl - line : (long)strlen(line));
            fprintf(stderr, "%.*s\n", len, line);
            line = nl ? nl + 1 : NULL;
        }
        wf_free(text);
    }
    if (explain) {
        /* every node with the reason it runs where it does, copies included: name: (Op): device  # why */
        char *text = NULL;
        if ((s = wf_session_placement(sess, feeds, n_feeds, fetches, n_out, &text))) goto out;
        printf("placement:\n%s", text);
        wf_free(text);
    }
    double t_first = 0;
    for (int it = 0; it <= iterations; it++) {
        for (int j = 0; j < n_out; j++) {
            wf_tensor_free(outs[j]);
            outs[j] = NULL;
        }
        double t0 = now_ms();
        if ((s = wf_session_run(sess, feeds, n_feeds, fetches, n_out, outs, NULL))) goto out;
        double dt = now_ms() - t0;
        if (it == 0) t_first = dt;
        else times[it - 1] = dt;
        if (iterations == 1 && it == 0) { times[0] = dt; break; }
    }
    for (int j = 0; j < n_out; j++) {
        const wf_tensor *t = outs[j];
        char sh[256];
        shape_str(wf_tensor_rank(t), wf_tensor_dims(t), sh, sizeof sh);
        printf("%s: %s %s [", wf_onnx_output(m, j)->name, wf_dtype_name(wf_tensor_dtype(t)), sh);
        int64_t show = wf_tensor_size(t) < 6 ? wf_tensor_size(t) : 6;
        for (int64_t i = 0; i < show; i++) printf("%s%.6g", i ? ", " : "", elem(t, i));
        printf("%s]\n", wf_tensor_size(t) > show ? ", ..." : "");
        if (out_dir) {
            char fname[512], path[4096];
            safe_name(wf_onnx_output(m, j)->name, fname, sizeof fname);
            mkdir(out_dir, 0777);
            snprintf(path, sizeof path, "%s/%s.npy", out_dir, fname);
            if ((s = wf_npy_write(path, t))) goto out;
        }
    }
    if (profile_path) {
        /* One more run, traced: tracing waits for accelerators after each of their nodes, which would
         * distort the timed runs above. */
        wf_tensor **pouts = calloc((size_t)n_out + 1, sizeof *pouts);
        wf_run_options ro = {&trace};
        if (!pouts) {
            fprintf(stderr, "weft run: out of memory\n");
            goto out;
        }
        s = wf_session_run(sess, feeds, n_feeds, fetches, n_out, pouts, &ro);
        for (int j = 0; j < n_out; j++) wf_tensor_free(pouts[j]);
        free(pouts);
        if (s) goto out;
        if ((s = wf_trace_write_chrome(trace, ctx, profile_path))) goto out;
        char *text = NULL;
        if ((s = wf_trace_summary_text(trace, ctx, &text))) goto out;
        fprintf(stderr, "%s(trace written to %s)\n", text, profile_path);
        wf_free(text);
    }
    int nt = iterations == 1 ? 1 : iterations;
    qsort(times, (size_t)nt, sizeof *times, cmp_double);
    printf("time: first %.3f ms, median %.3f ms over %d runs\n", t_first, times[nt / 2], nt);
    rc = 0;
out:
    if (s) rc = cli_fail(s);
    for (int k = 0; feeds && k < n_feeds; k++) wf_tensor_free((wf_tensor *)feeds[k].tensor);
    for (int j = 0; outs && j < n_out; j++) wf_tensor_free(outs[j]);
    free(feeds);
    free(fetches);
    free(outs);
    free(times);
    free(specs);
    free(limits);
    free(places);
    wf_trace_free(trace);
    wf_session_free(sess);
    wf_onnx_model_free(m);
    wf_graph_free(g);
    wf_context_free(ctx);
    return rc;
}

int cmd_inspect(int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "usage: weft inspect MODEL.onnx\n");
        return 2;
    }
    char *text = NULL;
    wf_status *s = wf_onnx_inspect(argv[0], &text);
    if (s) return cli_fail(s);
    fputs(text, stdout);
    wf_free(text);
    return 0;
}
