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
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/core.h"

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
            feeds[n_feeds].output = in[i];
            feeds[n_feeds].tensor = c->in[i];
            n_feeds++;
        }
    }
    if (!s) s = wf_op(g, c->op, "node", in, c->n_in, c->attrs, c->n_attrs, &node);
    int n_out = node ? wf_node_num_outputs(node) : 0;
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = g_device;
    so.strict_placement = g_device != NULL;
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
    for (;;) {
        if (argc > 2 && !strcmp(argv[1], "--device")) {
            g_device = argv[2];
        } else if (argc > 2 && !strcmp(argv[1], "--max-unsupported")) {
            char *end;
            max_unsupported = strtol(argv[2], &end, 10);
            if (*end || max_unsupported < 0) {
                fprintf(stderr, "--max-unsupported wants a count, got '%s'\n", argv[2]);
                return 2;
            }
        } else {
            break;
        }
        argv += 2;
        argc -= 2;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s [--device SPEC] [--max-unsupported N] CASE_DIR [NAME_SUBSTRING]\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    const char *filter = argc > 2 ? argv[2] : NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.txt", g_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 2;
    }
    wf_context *ctx;
    CHECK_OK(wf_context_new(NULL, &ctx));
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
