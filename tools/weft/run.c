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

/* --precision: the same inputs once through an f32 session (the same options, no amp), and per output
 * the largest |difference| from it, with the largest |f32 value| for scale and where NaN/Inf differ. */
static int precision_deviation(wf_context *ctx, wf_graph *g, const wf_session_options *so, const wf_onnx_model *m,
                               const wf_feed *feeds, int n_feeds, const wf_output *fetches, wf_tensor **outs,
                               int n_out, wf_status **sp)
{
    wf_session_options o = *so;
    o.precision = WF_F32;
    o.amp_lists = NULL;
    o.dump_graph_dir = NULL;
    wf_session *ref = NULL;
    wf_tensor **want = calloc((size_t)n_out + 1, sizeof *want);
    if (!want) {
        fprintf(stderr, "weft run: out of memory\n");
        return 1;
    }
    wf_status *s = wf_session_new(ctx, g, &o, &ref);
    if (!s) s = wf_session_run(ref, feeds, n_feeds, fetches, n_out, want, NULL);
    for (int j = 0; !s && j < n_out; j++) {
        const wf_tensor *a = outs[j], *b = want[j];
        int64_t n = wf_tensor_size(b), worst = -1, mismatched = 0;
        double dmax = 0, ref_max = 0;
        for (int64_t i = 0; i < n && wf_tensor_size(a) == n; i++) {
            double x = elem(a, i), y = elem(b, i), d = fabs(x - y);
            if (isfinite(y) && fabs(y) > ref_max) ref_max = fabs(y);
            if (isnan(x) != isnan(y) || (isinf(x) || isinf(y) ? x != y : false)) {
                mismatched++;
                continue;
            }
            if (isfinite(d) && d > dmax) {
                dmax = d;
                worst = i;
            }
        }
        printf("precision: output %s: largest deviation from f32 %.3g at [%lld] (largest |f32| %.3g, relative %.3g)",
               wf_onnx_output(m, j)->name, dmax, (long long)worst, ref_max, ref_max > 0 ? dmax / ref_max : 0.0);
        if (mismatched) printf("; %lld NaN/Inf differ", (long long)mismatched);
        printf("\n");
    }
    for (int j = 0; j < n_out; j++) wf_tensor_free(want[j]);
    free(want);
    wf_session_free(ref);
    *sp = s;
    return s != NULL;
}

static void run_usage(FILE *f)
{
    fprintf(f, "usage: weft run MODEL.onnx|SAVED_MODEL_DIR [--input NAME=FILE.npy|FILE.pb]... [--random-inputs]\n"
               "                [--output-dir DIR] [--iterations N] [--threads N] [--inter-op-threads N]\n"
               "                [--intra-op-threads N] [--device SPEC]\n"
               "                [--strict-placement] [--memory-limit SPEC=SIZE]... [--log-device-placement]\n"
               "                [--place PATTERN=SPEC]... [--explain] [--calibrate] [--profile FILE.json]\n"
               "                [--report FILE.html] [--opt-level N] [--disable-pass NAME]... [--dump-graph DIR]\n"
               "                [--save-optimized FILE.onnx] [--precision f32|bf16|f16] [--amp-lists EDITS]\n"
               "Imports an ONNX model, runs it, prints and saves its outputs and times repeated runs.\n"
               "  --input NAME=FILE      feed the model's input NAME from a .npy or TensorProto .pb file\n"
               "  --random-inputs        deterministic values for every input not given\n"
               "  --output-dir DIR       write NAME.npy per output into DIR (created with its parents)\n"
               "  --iterations N         timed runs after the first, 1 to 1000000 (default 10)\n"
               "  --threads N            threads, 0 to 1024 (default 0: one per core)\n"
               "  --inter-op-threads N   threads that run independent nodes (TensorFlow's\n"
               "                         inter_op_parallelism_threads); overrides --threads for them\n"
               "  --intra-op-threads N   threads inside one large kernel (intra_op_parallelism_threads)\n"
               "  --device SPEC          every node on SPEC (soft placement; --strict-placement: an error)\n"
               "  --memory-limit SPEC=SIZE  cap the memory of the matching devices; SIZE in bytes with an\n"
               "                         optional K, M, G or T (powers of 1024): 256M, 1.5G; 0: no limit\n"
               "  --place PATTERN=SPEC   request device SPEC for the nodes whose name matches the glob PATTERN,\n"
               "                         or whose op type matches it when written op:TYPE; repeatable, the\n"
               "                         first matching --place wins\n"
               "  --log-device-placement print each node's device on stderr; --explain: with the reasons\n"
               "  --calibrate            measure the devices' figures first and save them\n"
               "  --profile FILE.json    one more run, traced, written as a Chrome trace (checked writable\n"
               "                         before the run)\n"
               "  --report FILE.html     a self-contained HTML report of that traced run (timeline per\n"
               "                         device stream, utilisation, top ops, copies per link, live\n"
               "                         memory, the placed graph); with --profile, of the same run\n"
               "  --opt-level N          graph optimisation: 0 none; 1 identity removal, algebraic\n"
               "                         simplification, BatchNorm folding, MatMul+Add as MatMul+BiasAdd,\n"
               "                         constant folding, common subexpressions and kernel taps that\n"
               "                         read only padding dropped; 2 (default) and\n"
               "                         epilogue fusion after placement; 3 and channel-blocked layouts\n"
               "                         kept between convolutions (CPU, f32)\n"
               "  --disable-pass NAME    skip one pass (identity, simplify, bnfold, matmul_bias, amp, fold,\n"
               "                         cse, conv_crop, fuse, residual, jit, layout); repeatable\n"
               "  --precision bf16|f16   automatic mixed precision (the amp pass): MatMul, Gemm and the\n"
               "                         convolutions, and the elementwise ops between them, in that dtype\n"
               "                         where their device computes it natively (weft devices --verbose);\n"
               "                         then one f32 run of the same inputs and the largest deviation from\n"
               "                         it per output. --explain lists what converted and why not\n"
               "  --amp-lists EDITS      edit the amp lists: 'allow+=Op,Op;deny-=Op' (allow, infer, clear,\n"
               "                         deny)\n"
               "  --dump-graph DIR       write the graph before and after each pass into DIR (NN-PASS.txt)\n"
               "  --save-optimized FILE  write the graph after the level's graph passes (not level 2's\n"
               "                         fusion, which is per device) as an ONNX model, before the runs\n"
               "Exit status: 0 done, 1 the model, an input, a file or the run failed, 2 a usage error.\n");
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
            return CLI_USAGE;
        }
    free(hits);
    return 0;
}

/* --input NAME=FILE, checked before the model loads: the form (a usage error) and that FILE is a
 * regular file that exists (a file error). Which NAMEs the model has is checked after loading it. */
static int check_input(const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return cli_usage_error("run", "--input wants NAME=FILE, got '%s'", spec);
    struct stat st;
    if (stat(eq + 1, &st) != 0) {
        fprintf(stderr, "weft run: --input %.*s: cannot read '%s': %s\n", (int)(eq - spec), spec, eq + 1,
                strerror(errno));
        return 1;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "weft run: --input %.*s: '%s' is not a regular file\n", (int)(eq - spec), spec, eq + 1);
        return 1;
    }
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
    const char *profile_path = NULL, *report_path = NULL;
    int iterations = 10, threads = 0, random_inputs = 0, n_specs = 0, strict = 0, log_placement = 0, n_limits = 0;
    int inter_threads = -1, intra_threads = -1; /* -1: as --threads */
    int n_places = 0, explain = 0, calibrate = 0, opt_level = WF_OPT_LEVEL_DEFAULT;
    const char *dump_dir = NULL, *save_optimized = NULL, *amp_lists = NULL;
    wf_dtype precision = WF_F32;
    char disabled[1024] = "";
    const char **specs = calloc((size_t)argc + 1, sizeof *specs);
    const char **limits = calloc((size_t)argc + 1, sizeof *limits);
    const char **places = calloc((size_t)argc + 1, sizeof *places);
    uint64_t *limit_bytes = calloc((size_t)argc + 1, sizeof *limit_bytes);
    int rc = CLI_USAGE;
    if (!specs || !limits || !places || !limit_bytes) {
        fprintf(stderr, "weft run: out of memory\n");
        rc = 1;
        goto usage_out;
    }
    if (cli_wants_help(argc, argv)) {
        run_usage(stdout);
        rc = 0;
        goto usage_out;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        long long n;
#define VALUE(META) if (!(v = cli_value("run", argc, argv, &i, META))) goto usage_out
        if (!strcmp(a, "--input")) {
            VALUE("NAME=FILE");
            int bad = check_input(v);
            if (bad) {
                rc = bad;
                goto usage_out;
            }
            specs[n_specs++] = v;
        } else if (!strcmp(a, "--random-inputs")) random_inputs = 1;
        else if (!strcmp(a, "--output-dir")) { VALUE("DIR"); out_dir = v; }
        else if (!strcmp(a, "--iterations")) {
            VALUE("N");
            if (cli_int("run", a, v, 1, 1000000, &n)) goto usage_out;
            iterations = (int)n;
        } else if (!strcmp(a, "--threads")) {
            VALUE("N");
            if (cli_int("run", a, v, 0, 1024, &n)) goto usage_out;
            threads = (int)n;
        } else if (!strcmp(a, "--inter-op-threads") || !strcmp(a, "--intra-op-threads")) {
            VALUE("N");
            if (cli_int("run", a, v, 0, 1024, &n)) goto usage_out;
            if (!strcmp(a, "--inter-op-threads")) inter_threads = (int)n;
            else intra_threads = (int)n;
        } else if (!strcmp(a, "--device")) { VALUE("SPEC"); device = v; }
        else if (!strcmp(a, "--strict-placement")) strict = 1;
        else if (!strcmp(a, "--log-device-placement")) log_placement = 1;
        else if (!strcmp(a, "--memory-limit")) {
            VALUE("SPEC=SIZE");
            const char *eq = strrchr(v, '=');
            uint64_t bytes;
            if (!eq || eq == v) {
                cli_usage_error("run", "--memory-limit wants SPEC=SIZE (e.g. OPENCL:0=256M), got '%s'", v);
                goto usage_out;
            }
            if (cli_size(eq + 1, &bytes)) {
                cli_usage_error("run", "--memory-limit %s: SIZE wants a number of bytes with an optional K, M, G or T "
                                "(e.g. 256M), got '%s'", v, eq + 1);
                goto usage_out;
            }
            limits[n_limits] = v;
            limit_bytes[n_limits++] = bytes;
        } else if (!strcmp(a, "--place")) {
            VALUE("PATTERN=SPEC");
            if (!strchr(v, '=') || v[0] == '=') {
                cli_usage_error("run", "--place wants PATTERN=SPEC (e.g. 'op:MatMul=OPENCL:0'), got '%s'", v);
                goto usage_out;
            }
            places[n_places++] = v;
        } else if (!strcmp(a, "--opt-level")) {
            VALUE("N");
            if (cli_int("run", a, v, 0, 3, &n)) goto usage_out;
            opt_level = (int)n;
        } else if (!strcmp(a, "--disable-pass")) {
            VALUE("NAME");
            if (strlen(disabled) + strlen(v) + 2 > sizeof disabled) {
                cli_usage_error("run", "--disable-pass: too many names");
                goto usage_out;
            }
            if (*disabled) strcat(disabled, ",");
            strcat(disabled, v);
        } else if (!strcmp(a, "--dump-graph")) { VALUE("DIR"); dump_dir = v; }
        else if (!strcmp(a, "--save-optimized")) { VALUE("FILE.onnx"); save_optimized = v; }
        else if (!strcmp(a, "--precision")) {
            VALUE("f32|bf16|f16");
            if (!strcmp(v, "bf16")) precision = WF_BF16;
            else if (!strcmp(v, "f16")) precision = WF_F16;
            else if (!strcmp(v, "f32")) precision = WF_F32;
            else {
                cli_usage_error("run", "--precision wants f32, bf16 or f16, got '%s'", v);
                goto usage_out;
            }
        } else if (!strcmp(a, "--amp-lists")) { VALUE("EDITS"); amp_lists = v; }
        else if (!strcmp(a, "--explain")) explain = 1;
        else if (!strcmp(a, "--calibrate")) calibrate = 1;
        else if (!strcmp(a, "--profile")) { VALUE("FILE.json"); profile_path = v; }
        else if (!strcmp(a, "--report")) { VALUE("FILE.html"); report_path = v; }
        else if (a[0] == '-' && a[1]) {
            cli_usage_error("run", "unknown option '%s' (see 'weft run --help')", a);
            goto usage_out;
        } else if (model_path) {
            cli_usage_error("run", "one model expected, got '%s' and '%s'", model_path, a);
            goto usage_out;
        } else model_path = a;
#undef VALUE
    }
    if (!model_path) {
        cli_usage_error("run", "no model given (weft run MODEL.onnx [OPTIONS]; see 'weft run --help')");
        goto usage_out;
    }
    /* A SavedModel directory (the Python package's tf.saved_model.save): its graph is DIR/saved_model.onnx */
    char saved_path[4096];
    struct stat saved_st;
    if (stat(model_path, &saved_st) == 0 && S_ISDIR(saved_st.st_mode)) {
        int n = snprintf(saved_path, sizeof saved_path, "%s/saved_model.onnx", model_path);
        if (n < 0 || (size_t)n >= sizeof saved_path || stat(saved_path, &saved_st) != 0) {
            fprintf(stderr, "weft run: %s is a directory without saved_model.onnx (not a weft SavedModel)\n", model_path);
            rc = 1;
            goto usage_out;
        }
        model_path = saved_path;
    }
    /* paths the run will write, before the minutes it may take */
    if (out_dir && cli_mkdirs("run", "--output-dir", out_dir)) {
        rc = 1;
        goto usage_out;
    }
    if (profile_path && cli_check_writable("run", "--profile", profile_path, "")) {
        rc = 1;
        goto usage_out;
    }
    if (report_path && cli_check_writable("run", "--report", report_path, "")) {
        rc = 1;
        goto usage_out;
    }
    wf_context_options co;
    wf_context_options_init(&co);
    co.inter_op_threads = inter_threads >= 0 ? inter_threads : threads;
    co.intra_op_threads = intra_threads >= 0 ? intra_threads : threads;
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_onnx_model *m = NULL;
    wf_session *sess = NULL;
    wf_feed *feeds = NULL;
    wf_output *fetches = NULL;
    wf_tensor **outs = NULL;
    wf_trace *trace = NULL;
    double *times = NULL;
    int n_feeds = 0, n_out = 0;
    rc = 1;
    wf_status *s = wf_context_new(&co, &ctx);
    /* measured device figures for the placer, saved for later runs (weft devices --calibrate) */
    if (!s && calibrate) s = wf_context_calibrate(ctx, NULL, NULL);
    for (int k = 0; !s && k < n_limits; k++) {
        const char *eq = strrchr(limits[k], '=');
        char spec[256];
        snprintf(spec, sizeof spec, "%.*s", (int)(eq - limits[k]), limits[k]);
        s = wf_context_set_memory_limit(ctx, spec, limit_bytes[k]);
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
        size_t nl = (size_t)(eq - specs[k]);
        int idx = -1;
        for (int i = 0; i < n_in; i++)
            if (strlen(wf_onnx_input(m, i)->name) == nl && !strncmp(wf_onnx_input(m, i)->name, specs[k], nl)) idx = i;
        if (idx < 0) {
            fprintf(stderr, "weft run: %s: the model has no input named '%.*s'\n", model_path, (int)nl, specs[k]);
            list_inputs(m, stderr);
            rc = CLI_USAGE;
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
            rc = CLI_USAGE;
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
    so.opt_level = opt_level;
    so.disable_passes = *disabled ? disabled : NULL;
    so.dump_graph_dir = dump_dir;
    so.precision = precision;
    so.amp_lists = amp_lists;
    if ((s = wf_session_new(ctx, g, &so, &sess))) goto out;
    if (save_optimized) {
        const char **names = calloc((size_t)n_out + 1, sizeof *names);
        if (!names) {
            fprintf(stderr, "weft run: out of memory\n");
            goto out;
        }
        for (int j = 0; j < n_out; j++) names[j] = wf_onnx_output(m, j)->name;
        s = wf_session_export_optimized_onnx(sess, feeds, n_feeds, fetches, names, n_out, save_optimized);
        free(names);
        if (s) goto out;
    }
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
    if (explain && precision != WF_F32) {
        char *text = NULL;
        if ((s = wf_session_precision_report(sess, feeds, n_feeds, fetches, n_out, &text))) goto out;
        printf("precision (%s):\n%s", wf_dtype_name(precision), text);
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
    /* before anything else runs (--precision's f32 reference) */
    cli_print_memory(ctx);
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
            snprintf(path, sizeof path, "%s/%s.npy", out_dir, fname);
            if ((s = wf_npy_write(path, t))) goto out;
        }
    }
    if (profile_path || report_path) {
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
        if (profile_path && (s = wf_trace_write_chrome(trace, ctx, profile_path))) goto out;
        if (report_path && (s = wf_trace_write_report(trace, ctx, report_path))) goto out;
        char *text = NULL;
        if ((s = wf_trace_summary_text(trace, ctx, &text))) goto out;
        fputs(text, stderr);
        if (profile_path) fprintf(stderr, "(trace written to %s)\n", profile_path);
        if (report_path) fprintf(stderr, "(report written to %s)\n", report_path);
        wf_free(text);
    }
    if (precision != WF_F32 && precision_deviation(ctx, g, &so, m, feeds, n_feeds, fetches, outs, n_out, &s)) goto out;
    int nt = iterations == 1 ? 1 : iterations;
    qsort(times, (size_t)nt, sizeof *times, cmp_double);
    /* nearest-rank percentiles of the timed runs: the spread that a median alone hides */
    printf("time: first %.3f ms, median %.3f ms over %d runs (p10 %.3f ms, p90 %.3f ms)\n", t_first, times[nt / 2], nt,
           times[(nt - 1) / 10], times[((nt - 1) * 9 + 9) / 10]);
    rc = 0;
out:
    if (s) rc = cli_fail(s);
    for (int k = 0; feeds && k < n_feeds; k++) wf_tensor_free((wf_tensor *)feeds[k].tensor);
    for (int j = 0; outs && j < n_out; j++) wf_tensor_free(outs[j]);
    free(feeds);
    free(fetches);
    free(outs);
    free(times);
    wf_trace_free(trace);
    wf_session_free(sess);
    wf_onnx_model_free(m);
    wf_graph_free(g);
    wf_context_free(ctx);
usage_out:
    free(specs);
    free(limits);
    free(places);
    free(limit_bytes);
    return rc;
}

static void inspect_usage(FILE *f)
{
    fprintf(f, "usage: weft inspect MODEL.onnx | FILE.npy | FILE.safetensors\n"
               "Prints the IR and opset versions, the producer, the inputs and outputs with their shapes, an op\n"
               "histogram, the parameter count and bytes, and the ops weft does not support (an op of another\n"
               "domain once, with the opset the model imports for it), without importing the model.\n"
               "A .npy or .safetensors file (an input, a checkpoint) is read and checked whole, and each tensor\n"
               "is listed with its dtype, shape and bytes.\n"
               "Exit status: 0 done, 1 the file cannot be read, 2 a usage error.\n");
}

/* One line per tensor of a .npy or safetensors file; the readers check the whole file first. */
static int inspect_tensors(const char *path)
{
    int n = 1;
    char **names = NULL;
    wf_tensor **ts = NULL, *t = NULL;
    bool st = ends_with(path, ".safetensors");
    wf_status *s = st ? wf_safetensors_read(path, &n, &names, &ts) : wf_npy_read(path, &t);
    if (s) return cli_fail(s);
    unsigned long long total = 0;
    for (int i = 0; i < n; i++) {
        const wf_tensor *x = st ? ts[i] : t;
        char sh[256];
        shape_str(wf_tensor_rank(x), wf_tensor_dims(x), sh, sizeof sh);
        printf("%s: %s %s, %zu bytes\n", st ? names[i] : path, wf_dtype_name(wf_tensor_dtype(x)), sh,
               wf_tensor_bytes(x));
        total += wf_tensor_bytes(x);
    }
    printf("%d tensor%s, %llu bytes\n", n, n == 1 ? "" : "s", total);
    if (st) wf_safetensors_free(n, names, ts);
    wf_tensor_free(t);
    return 0;
}

int cmd_inspect(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        inspect_usage(stdout);
        return 0;
    }
    const char *model_path = NULL;
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("inspect", "unknown option '%s' (see 'weft inspect --help')", argv[i]);
        if (model_path) return cli_usage_error("inspect", "one model expected, got '%s' and '%s'", model_path, argv[i]);
        model_path = argv[i];
    }
    if (!model_path) return cli_usage_error("inspect", "no model given (weft inspect MODEL.onnx)");
    if (ends_with(model_path, ".npy") || ends_with(model_path, ".safetensors")) return inspect_tensors(model_path);
    char *text = NULL;
    wf_status *s = wf_onnx_inspect(model_path, &text);
    if (s) return cli_fail(s);
    fputs(text, stdout);
    wf_free(text);
    return 0;
}
