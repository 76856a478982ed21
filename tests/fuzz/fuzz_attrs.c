/*
 * libFuzzer target for the graph builder's attribute and shape-inference paths: the input picks an op
 * from the registry, builds a few inputs (placeholders of fuzzed dtype and partly unknown shape, or
 * small constants of fuzzed values) and a list of fuzzed attributes (mostly the op's own names, of the
 * declared type or another), and calls wf_op. The input starts with the op's name (length, then bytes),
 * which is how the seeds pick each op; a name no op has picks one by its hash. Errors are fine; a crash, leak, sanitizer report, a
 * failure that changes the graph or a message that does not name the op is not.
 * Built and run by scripts/fuzz.sh (it links the library's internals for the registry).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/op.h"

#define MAX_OPS 1024
#define MAX_IN 6
#define MAX_ATTRS 8
#define MAX_LIST 10

static const wf__op_def *g_ops[MAX_OPS];
static int g_n_ops;

static void collect(const wf__op_def *op, void *user)
{
    (void)user;
    if (g_n_ops < MAX_OPS) g_ops[g_n_ops++] = op;
}

/* The seed corpus, in the input encoding LLVMFuzzerTestOneInput reads: per op, float placeholders of
 * rank 2 and of rank 4 and each declared attribute of its declared type with a value of 1 (strings
 * keep their defaults; the second seed sets the optional ones too). */
static void write_seeds(const char *dir)
{
    for (int i = 0; i < g_n_ops; i++) {
        const wf__op_def *op = g_ops[i];
        for (int v = 0; v < 2; v++) {
            uint8_t b[512];
            size_t o = 0;
            size_t nl = strlen(op->name) < 31 ? strlen(op->name) : 31;
            b[o++] = (uint8_t)nl;
            memcpy(b + o, op->name, nl);
            o += nl;
            int n_in = op->min_in < MAX_IN ? op->min_in : MAX_IN;
            if (n_in == 0 && op->max_in != 0 && v) n_in = 1;
            b[o++] = (uint8_t)n_in;
            for (int k = 0; k < n_in; k++) {
                b[o++] = 0;              /* placeholder */
                b[o++] = 0;              /* f32 */
                b[o++] = v ? 5 : 3;      /* rank 4 or 2 */
                static const uint8_t d4[4] = {1, 2, 4, 4}, d2[2] = {2, 3};
                for (int j = 0; j < (v ? 4 : 2); j++) b[o++] = v ? d4[j] : d2[j];
            }
            size_t n_at = o++;
            int n_attrs = 0;
            for (int k = 0; k < WF__MAX_ATTRS && op->attrs[k].name && n_attrs < MAX_ATTRS; k++) {
                const wf__attr_def *d = &op->attrs[k];
                if ((!d->required && !v) || d->type == WF_ATTR_STRING) continue;
                b[o++] = (uint8_t)k; /* the k-th declared name */
                b[o++] = 0;          /* of its declared type */
                switch (d->type) {
                case WF_ATTR_INT: b[o++] = 5; break;   /* 1 */
                case WF_ATTR_FLOAT: b[o++] = 12; break; /* 1.0 */
                case WF_ATTR_INTS:
                case WF_ATTR_FLOATS: b[o++] = 2; for (int j = 0; j < 2; j++) { b[o++] = 5; b[o++] = 12; } b[o++] = 0; b[o++] = 0; break;
                case WF_ATTR_DTYPE: b[o++] = 0; break;  /* f32 */
                case WF_ATTR_TENSOR: b[o++] = 0; b[o++] = 0; b[o++] = 1; b[o++] = 2; for (int j = 0; j < 8; j++) b[o++] = 0; break;
                default: break;
                }
                n_attrs++;
            }
            b[n_at] = (uint8_t)n_attrs;
            b[o++] = 0;
            char path[1200];
            snprintf(path, sizeof path, "%s/%s_%d", dir, op->name, v);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(b, 1, o, f) != o) abort();
            fclose(f);
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wf__op_foreach(collect, NULL);
    const char *seeds = getenv("WEFT_FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        printf("%d seeds in %s\n", 2 * g_n_ops, seeds);
        exit(0);
    }
    return 0;
}

/* Reads the input front to back; past its end every read is 0. */
typedef struct reader {
    const uint8_t *p, *end;
} reader;

static uint8_t u8(reader *r) { return r->p < r->end ? *r->p++ : 0; }

static uint64_t u64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)u8(r) << (8 * i);
    return v;
}

/* Small integers most of the time (axes, sizes, flags), the whole int64 range sometimes. */
static int64_t fuzz_int(reader *r)
{
    uint8_t k = u8(r);
    if (k < 200) return (int64_t)(k % 16) - 4;
    if (k < 240) return (int64_t)(int8_t)u8(r) * 37;
    return (int64_t)u64(r);
}

static double fuzz_float(reader *r)
{
    uint8_t k = u8(r);
    if (k < 128) return ((double)(k % 32) - 8) / 4;
    static const double special[] = {0.0, -0.0, 1e300, -1e300, 1e-310, 3.4028235e38, 65504, 0.5};
    if (k < 192) return special[k % 8];
    uint64_t bits = u64(r);
    double d;
    memcpy(&d, &bits, sizeof d); /* NaN and infinities included */
    return d;
}

static wf_dtype fuzz_dtype(reader *r)
{
    uint8_t k = u8(r);
    if (k == 255) return (wf_dtype)(int8_t)u8(r); /* invalid values too */
    return (wf_dtype)(1 + k % 10);
}

/* A small tensor of `dtype` whose bytes come from the input. NULL when the dtype is invalid. */
static wf_tensor *fuzz_tensor(reader *r, wf_dtype dtype)
{
    int rank = u8(r) % 4;
    int64_t dims[4];
    for (int i = 0; i < rank; i++) dims[i] = u8(r) % 5;
    wf_tensor *t = NULL;
    wf_status *s = wf_tensor_new(dtype, rank, dims, NULL, &t);
    if (s) {
        wf_status_free(s);
        return NULL;
    }
    uint8_t *d = wf_tensor_data(t);
    size_t n = wf_tensor_bytes(t);
    for (size_t i = 0; i < n; i++) d[i] = u8(r);
    if (dtype == WF_BOOL)
        for (size_t i = 0; i < n; i++) d[i] &= 1;
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, data + size};
    if (!g_n_ops) abort();
    /* the op: a length and a name (how the seeds pick one), else a name's hash picks one */
    int len = u8(&r) % 32;
    char opname[32];
    unsigned h = 0;
    for (int i = 0; i < len; i++) h = h * 31 + (unsigned char)(opname[i] = (char)u8(&r));
    opname[len] = 0;
    const wf__op_def *op = wf__op_lookup(opname);
    if (!op) op = g_ops[h % (unsigned)g_n_ops];
    wf_graph *g;
    if (wf_graph_new(&g)) abort();
    wf_tensor *owned[MAX_IN + MAX_ATTRS] = {0};
    int n_owned = 0;

    /* inputs: 0 placeholder (rank -1 allowed, dims -1 allowed), 1 constant, 2 omitted (optional) */
    int n_in = u8(&r) % (MAX_IN + 1);
    wf_output in[MAX_IN];
    for (int i = 0; i < n_in; i++) {
        uint8_t kind = u8(&r) % 3;
        wf_dtype dt = fuzz_dtype(&r);
        wf_status *s = NULL;
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        in[i].node = NULL;
        in[i].index = 0;
        if (kind == 0) {
            int rank = (int)(u8(&r) % 7) - 1;
            int64_t dims[WF_MAX_RANK];
            for (int k = 0; k < rank; k++) {
                uint8_t b = u8(&r);
                dims[k] = b >= 250 ? -1 : b % 7;
            }
            s = wf_placeholder(g, name, dt, rank, dims, &in[i]);
        } else if (kind == 1) {
            wf_tensor *t = fuzz_tensor(&r, dt);
            if (t) {
                s = wf_const(g, name, t, &in[i]);
                wf_tensor_free(t);
            }
        }
        wf_status_free(s);
    }
    int nodes_before = wf_graph_num_nodes(g);

    /* attributes: a name of the op (or a made-up one), a type (usually the declared one), a value */
    int n_defs = 0;
    while (n_defs < WF__MAX_ATTRS && op->attrs[n_defs].name) n_defs++;
    int n_attrs = u8(&r) % (MAX_ATTRS + 1);
    wf_attr attrs[MAX_ATTRS];
    int64_t ints[MAX_ATTRS][MAX_LIST];
    double floats[MAX_ATTRS][MAX_LIST];
    char strs[MAX_ATTRS][24], names[MAX_ATTRS][12];
    for (int a = 0; a < n_attrs; a++) {
        memset(&attrs[a], 0, sizeof attrs[a]);
        int pick = u8(&r) % (n_defs + 1);
        if (pick < n_defs) {
            attrs[a].name = op->attrs[pick].name;
        } else {
            int len = u8(&r) % (int)sizeof names[a];
            for (int k = 0; k < len; k++) names[a][k] = (char)(u8(&r) | 1);
            names[a][len] = 0;
            attrs[a].name = names[a];
        }
        uint8_t tk = u8(&r);
        attrs[a].type = pick < n_defs && tk < 192 ? op->attrs[pick].type : (wf_attr_type)(tk % 9);
        switch (attrs[a].type) {
        case WF_ATTR_INT: attrs[a].i = fuzz_int(&r); break;
        case WF_ATTR_FLOAT: attrs[a].f = fuzz_float(&r); break;
        case WF_ATTR_INTS:
        case WF_ATTR_FLOATS: {
            int n = u8(&r) % (MAX_LIST + 1);
            for (int k = 0; k < n; k++) {
                ints[a][k] = fuzz_int(&r);
                floats[a][k] = fuzz_float(&r);
            }
            attrs[a].n = u8(&r) == 3 ? -1 : n;
            uint8_t nul = u8(&r);
            attrs[a].ints = nul == 5 ? NULL : ints[a];
            attrs[a].floats = nul == 5 ? NULL : floats[a];
            break;
        }
        case WF_ATTR_STRING: {
            int len = u8(&r) % (int)sizeof strs[a];
            for (int k = 0; k < len; k++) strs[a][k] = (char)(u8(&r) | 1);
            strs[a][len] = 0;
            /* often a word some op takes */
            static const char *const words[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect",
                                                "edge", "linear", "nearest", "cubic", "half_pixel", "asymmetric",
                                                "round_prefer_floor", "floor", "sum", "mean", "none", "tanh", "relu"};
            uint8_t w = u8(&r);
            attrs[a].s = w == 255 ? NULL : w < 128 ? words[w % (sizeof words / sizeof words[0])] : strs[a];
            break;
        }
        case WF_ATTR_DTYPE: attrs[a].dtype = fuzz_dtype(&r); break;
        case WF_ATTR_TENSOR:
            if (u8(&r) != 9) {
                wf_tensor *t = fuzz_tensor(&r, fuzz_dtype(&r));
                if (t) owned[n_owned++] = t;
                attrs[a].tensor = t;
            }
            break;
        default: break; /* an invalid type: must be refused */
        }
    }
    /* an omitted input list with a count, and a count past the list, are the caller's bugs: not fuzzed */
    wf_node *node = NULL;
    wf_status *s = wf_op(g, op->name, u8(&r) & 1 ? "fuzzed" : NULL, n_in ? in : NULL, n_in, n_attrs ? attrs : NULL,
                         n_attrs, &node);
    if (s) {
        const char *msg = wf_status_message(s);
        if (!msg || !*msg || !strstr(msg, op->name) || strstr(msg, "(null)")) {
            fprintf(stderr, "bad error message for %s: '%s'\n", op->name, msg ? msg : "(null)");
            abort();
        }
        if (wf_graph_num_nodes(g) != nodes_before) {
            fprintf(stderr, "failed %s left %d nodes (had %d): %s\n", op->name, wf_graph_num_nodes(g), nodes_before,
                    msg);
            abort();
        }
        wf_status_free(s);
    } else {
        if (!node || strcmp(wf_node_op(node), op->name)) abort();
        for (int k = 0; k < wf_node_num_outputs(node); k++) {
            int64_t dims[WF_MAX_RANK];
            int rank = wf_output_shape(wf_out(node, k), dims);
            if (rank < -1 || rank > WF_MAX_RANK) abort();
            (void)wf_output_dtype(wf_out(node, k));
        }
    }
    for (int i = 0; i < n_owned; i++) wf_tensor_free(owned[i]);
    wf_graph_free(g);
    return 0;
}
