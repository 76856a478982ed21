/*
 * Op conformance against numpy. Reads the manifest that tests/ops/gen_cases.py writes (inputs and
 * numpy's outputs as .npy files), builds each case as one node through the public API, runs it and
 * compares. Usage: test_ops [--device SPEC] CASE_DIR [NAME_SUBSTRING]
 *
 * With --device the node runs on that device under strict placement (test-backend-ops style): a case
 * whose op has no kernel there is counted as unsupported, every other one must match numpy. More
 * unsupported cases than --max-unsupported N (default 0, what the README claims) fail the run, so a
 * kernel that goes missing cannot pass as a gap. Manifest "skip" lines (cases whose reference could
 * not be generated) are printed as SKIP and counted apart.
 *
 * test_ops [--device SPEC] --coverage CASE_DIR [ALLOW_LIST] runs nothing: it lists every (op, key
 * dtype) the device (default CPU:0) has a kernel registered for, marks those some non-error case
 * reaches (the key dtype of the kernel the case's node finds there), and prints the rest. It fails
 * when one of them is missing from ALLOW_LIST (default tests/ops/untested_dtypes.txt beside this
 * file), whose lines are "DEVICE_TYPE OP DTYPE reason", or when a line there for this device type
 * names a combination that is tested or not registered (a stale entry).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/core.h"
#include "device/device.h"
#include "graph/graph.h"

#define MAX_IN 64
#define MAX_ATTR 16

typedef struct {
    char name[256], op[64];
    wf_attr attrs[MAX_ATTR];
    int n_attrs;
    int64_t *attr_ints[MAX_ATTR];
    double *attr_floats[MAX_ATTR];
    char *attr_str[MAX_ATTR];
    wf_tensor *attr_tensor[MAX_ATTR];
    char *attr_names[MAX_ATTR];
    int n_in;
    int in_kind[MAX_IN]; /* 0 feed, 1 const, 2 none */
    wf_tensor *in[MAX_IN];
    int n_exp;
    wf_tensor *exp[MAX_IN];
    double rtol[MAX_IN], atol[MAX_IN];
    char err_code[64], err_text[512];
} ocase;

static void case_clear(ocase *c)
{
    for (int i = 0; i < c->n_attrs; i++) {
        free(c->attr_ints[i]);
        free(c->attr_floats[i]);
        free(c->attr_str[i]);
        free(c->attr_names[i]);
        wf_tensor_free(c->attr_tensor[i]);
    }
    for (int i = 0; i < c->n_in; i++) wf_tensor_free(c->in[i]);
    for (int i = 0; i < c->n_exp; i++) wf_tensor_free(c->exp[i]);
    memset(c, 0, sizeof *c);
}

static const char *g_dir;
static const char *g_device;
static int g_unsupported;

static wf_tensor *load(const char *file, const char *as)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    wf_tensor *t = NULL;
    wf_status *s = wf_npy_read(path, &t);
    if (s) {
        fprintf(stderr, "cannot load %s: %s\n", path, wf_status_message(s));
        wf_status_free(s);
        return NULL;
    }
    if (as && *as) {
        wf_dtype dt;
        wf_status *e = wf_dtype_from_name(as, &dt);
        if (e) {
            wf_status_free(e);
            return t;
        }
        wf_tensor *u;
        if (!wf_tensor_new(dt, t->rank, t->dims, NULL, &u)) {
            wf__convert(t->data, t->dtype, u->data, dt, t->size);
            wf_tensor_free(t);
            t = u;
        }
    }
    return t;
}

static bool close_enough(double got, double want, double rtol, double atol)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

static int compare(const ocase *c, int k, const wf_tensor *got)
{
    const wf_tensor *want = c->exp[k];
    char a[160], b[160];
    if (got->rank != want->rank || (got->rank && memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)got->rank))) {
        fprintf(stderr, "  %s: output %d shape %s, numpy %s\n", c->name, k, wf__shape_str(got->rank, got->dims, a),
                wf__shape_str(want->rank, want->dims, b));
        return 1;
    }
    /* numpy has no bf16: the reference may be f32 for a bf16 output. */
    bool same_kind = got->dtype == want->dtype || (got->dtype == WF_BF16 && want->dtype == WF_F32);
    if (!same_kind) {
        fprintf(stderr, "  %s: output %d dtype %s, numpy %s\n", c->name, k, wf_dtype_name(got->dtype),
                wf_dtype_name(want->dtype));
        return 1;
    }
    bool exact = !wf__dtype_is_float(got->dtype);
    int bad = 0;
    for (int64_t i = 0; i < got->size; i++) {
        bool ok;
        if (exact)
            ok = wf__load_i64(got->data, got->dtype, i) == wf__load_i64(want->data, want->dtype, i);
        else
            ok = close_enough(wf__load_f64(got->data, got->dtype, i), wf__load_f64(want->data, want->dtype, i),
                              c->rtol[k], c->atol[k]);
        if (!ok && bad++ < 3)
            fprintf(stderr, "  %s: output %d element %lld: got %.9g, numpy %.9g (rtol %g atol %g)\n", c->name, k,
                    (long long)i, wf__load_f64(got->data, got->dtype, i), wf__load_f64(want->data, want->dtype, i),
                    c->rtol[k], c->atol[k]);
    }
    if (bad) fprintf(stderr, "  %s: %d of %lld elements differ\n", c->name, bad, (long long)got->size);
    return bad != 0;
}

/* Returns 0 on pass. */
/* The case's inputs as graph nodes: Consts, Placeholders (each with its feed, when feeds is given) and
 * omitted optional inputs. */
static int g_opt_level; /* --opt-level: the sessions' graph optimisation */

static wf_status *build_inputs(wf_graph *g, const ocase *c, wf_output *in, wf_feed *feeds, int *n_feeds)
{
    wf_status *s = NULL;
    for (int i = 0; !s && i < c->n_in; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "in%d", i);
        if (c->in_kind[i] == 2) {
            in[i].node = NULL;
            in[i].index = 0;
        } else if (c->in_kind[i] == 1) {
            s = wf_const(g, nm, c->in[i], &in[i]);
        } else {
            s = wf_placeholder(g, nm, c->in[i]->dtype, c->in[i]->rank, c->in[i]->dims, &in[i]);
            if (!s && feeds) {
                feeds[*n_feeds].output = in[i];
                feeds[*n_feeds].tensor = c->in[i];
                (*n_feeds)++;
            }
        }
    }
    return s;
}

static int run_case(wf_context *ctx, ocase *c)
{
    wf_graph *g = NULL;
    wf_session *sess = NULL;
    wf_status *s = wf_graph_new(&g);
    wf_output in[MAX_IN];
    wf_feed feeds[MAX_IN];
    int n_feeds = 0, fail = 0;
    wf_tensor *out[MAX_IN] = {0};
    wf_node *node = NULL;
    if (!s) s = build_inputs(g, c, in, feeds, &n_feeds);
    if (!s) s = wf_op(g, c->op, "node", in, c->n_in, c->attrs, c->n_attrs, &node);
    int n_out = node ? wf_node_num_outputs(node) : 0;
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = g_device;
    so.strict_placement = g_device != NULL;
    so.opt_level = g_opt_level; /* 0 by default: the cases test kernels, which a fold would skip */
    if (!s) s = wf_session_new(ctx, g, &so, &sess);
    wf_output fetches[MAX_IN];
    int n_fetch = c->n_exp < n_out ? c->n_exp : n_out;
    for (int k = 0; k < n_fetch; k++) fetches[k] = wf_out(node, k);
    if (!s && c->err_code[0] && n_fetch == 0 && n_out > 0) {
        n_fetch = 1;
        fetches[0] = wf_out(node, 0);
    }
    if (!s) s = wf_session_run(sess, feeds, n_feeds, fetches, n_fetch, out, NULL);
    if (g_device && s && strstr(wf_status_message(s), "Cannot assign a device for operation node")) {
        /* no kernel for this op and dtype on the device: not a failure of the device, a gap */
        g_unsupported++;
        fprintf(stderr, "  UNSUPPORTED %s %s %s\n", c->op, c->n_in ? wf_dtype_name(c->in[0]->dtype) : "-", c->name);
        wf_status_free(s);
        wf_session_free(sess);
        wf_graph_free(g);
        return 0;
    }
    if (c->err_code[0]) {
        if (!s) {
            fprintf(stderr, "  %s: expected %s error containing '%s', but it succeeded\n", c->name, c->err_code,
                    c->err_text);
            fail = 1;
        } else if (strcmp(wf_code_name(wf_status_code(s)), c->err_code) || !strstr(wf_status_message(s), c->err_text)) {
            fprintf(stderr, "  %s: expected %s containing '%s', got %s: %s\n", c->name, c->err_code, c->err_text,
                    wf_code_name(wf_status_code(s)), wf_status_message(s));
            fail = 1;
        }
    } else if (s) {
        fprintf(stderr, "  %s: %s: %s\n", c->name, wf_code_name(wf_status_code(s)), wf_status_message(s));
        fail = 1;
    } else {
        if (c->n_exp > n_out) {
            fprintf(stderr, "  %s: numpy has %d outputs, the node %d\n", c->name, c->n_exp, n_out);
            fail = 1;
        }
        for (int k = 0; k < n_fetch; k++) fail |= compare(c, k, out[k]);
        /* A second run reuses the plan and must agree (kernel state, in-place reuse). */
        wf_tensor *again[MAX_IN] = {0};
        wf_status *s2 = wf_session_run(sess, feeds, n_feeds, fetches, n_fetch, again, NULL);
        if (s2) {
            fprintf(stderr, "  %s: second run failed: %s\n", c->name, wf_status_message(s2));
            fail = 1;
            wf_status_free(s2);
        } else {
            for (int k = 0; k < n_fetch; k++) {
                if (memcmp(again[k]->data, out[k]->data, out[k]->bytes)) {
                    /* NaN payloads aside, a rerun must be bit-identical */
                    fprintf(stderr, "  %s: second run differs in output %d\n", c->name, k);
                    fail = 1;
                }
                wf_tensor_free(again[k]);
            }
        }
    }
    for (int k = 0; k < n_fetch; k++) wf_tensor_free(out[k]);
    wf_status_free(s);
    wf_session_free(sess);
    wf_graph_free(g);
    return fail;
}


/* ---- --coverage ------------------------------------------------------------------------------------ */

#define MAX_OPS 1024
#define N_DT WF_NUM_DTYPES /* wf_dtype values 1..WF_NUM_DTYPES-1, WF_STRING included */

typedef struct {
    const wf__op_def *op;
    uint32_t registered, tested;
} cov_op;

static cov_op g_cov[MAX_OPS];
static int g_n_cov;
static const struct wf__device *g_cov_dev;

/* The kernel device d has for op with these types (what the planner asks; lower/plan.c kernel_on). */
static const wf__kernel_def *cov_find(const char *op, const wf__tinfo *in, int n_in, const wf__tinfo *out)
{
    if (!g_cov_dev->vt) return wf__kernel_find(op, "CPU", in, n_in, out);
    return g_cov_dev->vt->find_kernel(g_cov_dev->dev, op, in, n_in, out);
}

static void cov_add_op(const wf__op_def *op, void *user)
{
    (void)user;
    if ((op->flags & WF__OP_SOURCE) || g_n_cov >= MAX_OPS) return;
    cov_op *c = &g_cov[g_n_cov++];
    c->op = op;
    /* every input and output of dtype d: the key, whichever it is, is d */
    static wf__tinfo in[16], out[16];
    int n_in = op->max_in < 0 || op->max_in > 16 ? 16 : op->max_in;
    for (int d = 1; d < N_DT; d++) {
        if (!wf__dtype_valid((wf_dtype)d)) continue;
        for (int i = 0; i < 16; i++) {
            in[i].dtype = out[i].dtype = (wf_dtype)d;
            in[i].rank = out[i].rank = 1;
            in[i].dims[0] = out[i].dims[0] = 4;
        }
        if (cov_find(op->name, in, n_in, out)) c->registered |= WF__DT_BIT(d);
    }
}

static cov_op *cov_get(const char *op)
{
    for (int i = 0; i < g_n_cov; i++)
        if (!strcmp(g_cov[i].op->name, op)) return &g_cov[i];
    return NULL;
}

/* Builds the case's node and records the key dtype of the kernel it finds on the device. */
static void cover_case(ocase *c)
{
    if (c->err_code[0] || !c->n_exp) return; /* an error case checks no kernel's numbers */
    wf_graph *g = NULL;
    wf_output in[MAX_IN];
    wf_node *node = NULL;
    wf_status *s = wf_graph_new(&g);
    if (!s) s = build_inputs(g, c, in, NULL, NULL);
    if (!s) s = wf_op(g, c->op, "node", in, c->n_in, c->attrs, c->n_attrs, &node);
    cov_op *co = node ? cov_get(node->op->name) : NULL;
    if (!s && co) {
        wf__tinfo ti[MAX_IN];
        for (int i = 0; i < node->n_in; i++) {
            if (node->in[i].node) {
                ti[i] = node->in[i].node->out[node->in[i].index];
            } else {
                ti[i].dtype = WF_DTYPE_INVALID;
                ti[i].rank = -1;
            }
        }
        const wf__kernel_def *k = cov_find(node->op->name, ti, node->n_in, node->out);
        if (k) {
            wf_dtype key = k->key_input >= 0 ? (k->key_input < node->n_in ? ti[k->key_input].dtype : WF_DTYPE_INVALID)
                                             : node->out[0].dtype;
            if (wf__dtype_valid(key)) co->tested |= WF__DT_BIT(key);
        }
    }
    wf_status_free(s);
    wf_graph_free(g);
}

/* Prints the untested combinations and checks them against the allow-list; returns the exit code. */
static int cov_report(const char *allow_path)
{
    const char *type = g_cov_dev->type;
    FILE *f = fopen(allow_path, "r");
    if (!f) {
        fprintf(stderr, "cannot open the allow-list %s\n", allow_path);
        return 2;
    }
    uint32_t allowed[MAX_OPS] = {0};
    char line[1024];
    int bad = 0, lineno = 0, n_allowed = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char dev[32] = "", op[64] = "", dt[16] = "";
        int used = 0;
        if (sscanf(line, "%31s %63s %15s %n", dev, op, dt, &used) < 3 || !line[used]) {
            fprintf(stderr, "%s:%d: want 'DEVICE_TYPE OP DTYPE reason': %s\n", allow_path, lineno, line);
            bad++;
            continue;
        }
        if (strcmp(dev, type) != 0) continue;
        wf_dtype d;
        wf_status *e = wf_dtype_from_name(dt, &d);
        cov_op *co = cov_get(op);
        if (e || !co) {
            fprintf(stderr, "%s:%d: unknown %s '%s'\n", allow_path, lineno, e ? "dtype" : "op", e ? dt : op);
            wf_status_free(e);
            bad++;
            continue;
        }
        if (!(co->registered & WF__DT_BIT(d)) || (co->tested & WF__DT_BIT(d))) {
            fprintf(stderr, "STALE %s:%d: %s %s %s is %s: remove the line\n", allow_path, lineno, type, op, dt,
                    co->registered & WF__DT_BIT(d) ? "tested" : "not registered");
            bad++;
            continue;
        }
        allowed[co - g_cov] |= WF__DT_BIT(d);
        n_allowed++;
    }
    fclose(f);
    int n_reg = 0, n_tested = 0, n_untested = 0, n_unlisted = 0;
    for (int i = 0; i < g_n_cov; i++) {
        cov_op *co = &g_cov[i];
        for (int d = 1; d < N_DT; d++) {
            uint32_t bit = WF__DT_BIT(d);
            if (!(co->registered & bit)) continue;
            n_reg++;
            if (co->tested & bit) {
                n_tested++;
                continue;
            }
            n_untested++;
            bool ok = allowed[i] & bit;
            if (!ok) n_unlisted++;
            printf("%s %s %s %s\n", ok ? "UNTESTED" : "UNTESTED-UNLISTED", type, co->op->name,
                   wf_dtype_name((wf_dtype)d));
        }
    }
    printf("coverage on %s: %d (op, dtype) kernels registered, %d tested by an op case, %d untested "
           "(%d of them not in %s), %d allow-list problems\n",
           g_cov_dev->short_name, n_reg, n_tested, n_untested, n_unlisted, allow_path, bad);
    return n_unlisted || bad ? 1 : 0;
}

static int parse_attr(ocase *c, char *rest)
{
    char *name = strtok(rest, " "), *type = strtok(NULL, " ");
    if (!name || !type || c->n_attrs >= MAX_ATTR) return -1;
    int k = c->n_attrs++;
    c->attr_names[k] = strdup(name);
    wf_attr *a = &c->attrs[k];
    if (!strcmp(type, "int")) {
        *a = wf_attr_int(c->attr_names[k], strtoll(strtok(NULL, " "), NULL, 10));
    } else if (!strcmp(type, "float")) {
        *a = wf_attr_float(c->attr_names[k], strtod(strtok(NULL, " "), NULL));
    } else if (!strcmp(type, "ints") || !strcmp(type, "floats")) {
        int n = atoi(strtok(NULL, " "));
        if (!strcmp(type, "ints")) {
            c->attr_ints[k] = calloc((size_t)n + 1, sizeof(int64_t));
            for (int i = 0; i < n; i++) c->attr_ints[k][i] = strtoll(strtok(NULL, " "), NULL, 10);
            *a = wf_attr_ints(c->attr_names[k], c->attr_ints[k], n);
        } else {
            c->attr_floats[k] = calloc((size_t)n + 1, sizeof(double));
            for (int i = 0; i < n; i++) c->attr_floats[k][i] = strtod(strtok(NULL, " "), NULL);
            *a = wf_attr_floats(c->attr_names[k], c->attr_floats[k], n);
        }
    } else if (!strcmp(type, "string")) {
        char *v = strtok(NULL, "");
        c->attr_str[k] = strdup(v ? v : "");
        *a = wf_attr_string(c->attr_names[k], c->attr_str[k]);
    } else if (!strcmp(type, "dtype")) {
        wf_dtype dt = WF_DTYPE_INVALID;
        wf_status_free(wf_dtype_from_name(strtok(NULL, " "), &dt));
        *a = wf_attr_dtype(c->attr_names[k], dt);
    } else if (!strcmp(type, "tensor")) {
        c->attr_tensor[k] = load(strtok(NULL, " "), NULL);
        if (!c->attr_tensor[k]) return -1;
        *a = wf_attr_tensor(c->attr_names[k], c->attr_tensor[k]);
    } else {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    long max_unsupported = 0;
    bool coverage = false;
    for (;;) {
        if (argc > 2 && !strcmp(argv[1], "--opt-level")) {
            g_opt_level = atoi(argv[2]);
            argv += 2;
            argc -= 2;
            continue;
        }
        if (argc > 2 && !strcmp(argv[1], "--device")) {
            g_device = argv[2];
            argv += 2;
            argc -= 2;
        } else if (argc > 2 && !strcmp(argv[1], "--max-unsupported")) {
            char *end;
            max_unsupported = strtol(argv[2], &end, 10);
            if (*end || max_unsupported < 0) {
                fprintf(stderr, "--max-unsupported wants a count, got '%s'\n", argv[2]);
                return 2;
            }
            argv += 2;
            argc -= 2;
        } else if (argc > 1 && !strcmp(argv[1], "--coverage")) {
            coverage = true;
            argv++;
            argc--;
        } else {
            break;
        }
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s [--opt-level N] [--device SPEC] [--max-unsupported N] CASE_DIR [NAME_SUBSTRING]\n"
                        "       %s [--device SPEC] --coverage CASE_DIR [ALLOW_LIST]\n", argv[0], argv[0]);
        return 2;
    }
    g_dir = argv[1];
    const char *filter = argc > 2 && !coverage ? argv[2] : NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", g_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 2;
    }
    wf_context *ctx;
    CHECK_OK(wf_context_new(NULL, &ctx));
    if (coverage) {
        const char *spec = g_device ? g_device : "CPU:0";
        wf_device_spec want, have;
        wf_status *e = wf_device_spec_parse(spec, &want);
        for (int i = 0; !e && i < ctx->n_devices && !g_cov_dev; i++) {
            if (!wf_device_spec_parse(ctx->devices[i].name, &have) && wf_device_spec_matches(&want, &have))
                g_cov_dev = &ctx->devices[i];
        }
        if (e || !g_cov_dev) {
            fprintf(stderr, "no device matches %s%s%s\n", spec, e ? ": " : "", e ? wf_status_message(e) : "");
            wf_status_free(e);
            wf_context_free(ctx);
            fclose(f);
            return 2;
        }
        wf__op_foreach(cov_add_op, NULL);
    }
    static ocase c;
    char line[65536];
    int passed = 0, failed = 0, bad_manifest = 0, skipped = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *sp = strchr(line, ' ');
        char *rest = sp ? sp + 1 : line + strlen(line);
        if (sp) *sp = 0;
        if (!strcmp(line, "case")) {
            case_clear(&c);
            sscanf(rest, "%255s %63s", c.name, c.op);
        } else if (!strcmp(line, "attr")) {
            if (parse_attr(&c, rest)) bad_manifest++;
        } else if (!strcmp(line, "input")) {
            char kind[16] = "", file[512] = "", as[16] = "";
            sscanf(rest, "%15s %511s %15s", kind, file, as);
            int i = c.n_in++;
            c.in_kind[i] = !strcmp(kind, "none") ? 2 : !strcmp(kind, "const") ? 1 : 0;
            if (c.in_kind[i] != 2 && !(c.in[i] = load(file, as))) bad_manifest++;
        } else if (!strcmp(line, "expect")) {
            char file[512];
            int k = c.n_exp++;
            sscanf(rest, "%511s %lf %lf", file, &c.rtol[k], &c.atol[k]);
            if (!(c.exp[k] = load(file, NULL))) bad_manifest++;
        } else if (!strcmp(line, "expect_error")) {
            sscanf(rest, "%63s", c.err_code);
            const char *t = strchr(rest, ' ');
            snprintf(c.err_text, sizeof c.err_text, "%s", t ? t + 1 : "");
        } else if (!strcmp(line, "skip")) {
            const char *why = strchr(rest, ' ');
            int n = why ? (int)(why - rest) : (int)strlen(rest);
            if (filter && !strstr(rest, filter)) continue;
            printf("SKIP %.*s: %s\n", n, rest, why ? why + 1 : "(no reason given)");
            skipped++;
        } else if (!strcmp(line, "end")) {
            if (coverage) {
                cover_case(&c);
                continue;
            }
            if (filter && !strstr(c.name, filter)) continue;
            if (run_case(ctx, &c)) {
                failed++;
                fprintf(stderr, "FAIL %s (%s)\n", c.name, c.op);
            } else {
                passed++;
            }
        }
    }
    case_clear(&c);
    fclose(f);
    if (coverage) {
        char allow[1024];
        if (argc > 2)
            snprintf(allow, sizeof allow, "%s", argv[2]);
        else
            snprintf(allow, sizeof allow, "%s", WEFT_UNTESTED_DTYPES);
        int rc = bad_manifest ? 1 : cov_report(allow);
        wf_context_free(ctx);
        return rc;
    }
    wf_context_free(ctx);
    if (bad_manifest) fprintf(stderr, "%d manifest entries could not be read\n", bad_manifest);
    bool too_many = g_unsupported > max_unsupported;
    if (g_device)
        printf("op cases on %s: %d unsupported there (no kernel; %ld allowed)%s\n", g_device, g_unsupported,
               max_unsupported, too_many ? ": FAIL, a kernel is missing" : "");
    /* unsupported cases count as failed when there are more than allowed, else apart from the rest */
    printf("op cases: %d passed, %d failed, %d skipped\n", passed - g_unsupported,
           failed + bad_manifest + (too_many ? g_unsupported : 0), skipped);
    return failed || bad_manifest || check_failures_ || too_many ? 1 : 0;
}
